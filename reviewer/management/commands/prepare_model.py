from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from inference.preparation import PreparationError, prepare_default_model


class Command(BaseCommand):
    help = "Convert the default model (SmolLM2-135M-Instruct GGUF) into a checkpoint under the data directory."

    def handle(self, *args: Any, **options: Any) -> None:
        target = settings.MODEL_DIR
        default = settings.DATA_DIR / "models" / "smollm2-135m-instruct"
        if target != default:
            if not (target / "config.json").exists():
                raise CommandError(
                    f"CAESURA_MODEL={target} holds no config.json: not a model directory"
                )
            self.stdout.write(f"Using the configured model at {target}")
            return
        try:
            prepare_default_model(target, report=self.stdout.write)
        except PreparationError as exc:
            raise CommandError(str(exc)) from exc
