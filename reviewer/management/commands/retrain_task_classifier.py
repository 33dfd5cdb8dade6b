"""Retrain the task classifier on the shipped examples and reviewers' corrections."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.analytics import task_models
from reviewer.lifecycle import task_types
from reviewer.models import TaskClassifierVersion

WHO = "manage.py retrain_task_classifier"


class Command(BaseCommand):
    help = (
        "Retrain the task classifier on the shipped examples plus every session a reviewer "
        f"labelled (at least {task_models.MIN_CORRECTIONS}), store it as a new version "
        "(audited) and, with --enable, make it the classifier of new sessions if its held-out "
        f"accuracy reaches {task_models.TARGET_ACCURACY:.0%}."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--enable", action="store_true", help="enable it if it reaches the target (audited)"
        )

    def handle(self, *args: Any, enable: bool, **options: Any) -> None:
        try:
            examples, metrics = task_models.train(
                task_types.load_examples(), task_models.corrected_examples()
            )
        except task_models.NotEnoughCorrections as exc:
            raise CommandError(f"{exc}; nothing stored") from None
        version = task_models.store_version(examples, metrics, WHO)
        self.report(version)
        if not enable:
            self.stdout.write("  disabled: run again with --enable, or enable it in the admin")
            return
        try:
            task_models.enable(version, WHO)
        except task_models.BelowTarget as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"  enabled: new sessions are labelled by v{version.version}")

    def report(self, version: TaskClassifierVersion) -> None:
        m = version.metrics
        self.stdout.write(
            f"task classifier v{version.version} ({version.checksum[:12]}): "
            f"{m['shipped_examples']} shipped + {m['corrected_examples']} corrected examples\n"
            f"  held out ({m['heldout_examples']} examples): accuracy {m['accuracy']:.1%} "
            f"(corrected ones: {m['corrected_heldout_accuracy']:.1%}); "
            f"target {task_models.TARGET_ACCURACY:.0%}"
        )
