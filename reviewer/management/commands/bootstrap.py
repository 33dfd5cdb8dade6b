from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Everything `make run` needs before it starts: services, model, schema, demo data."

    def handle(self, *args: Any, **options: Any) -> None:
        # One process for all steps: each separate start would import Django and torch again.
        call_command("check_services", stdout=self.stdout)
        call_command("prepare_model", stdout=self.stdout)
        call_command("compile_translations", stdout=self.stdout)
        call_command("migrate", interactive=False, verbosity=0, stdout=self.stdout)
        call_command("seed_demo", quiet_logins=True, stdout=self.stdout)
