from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from reviewer.demo.demo_data import DOMAINS
from reviewer.demo.loading import load_demo_data


class Command(BaseCommand):
    help = "Load the demo domains, glossaries and users (safe to run again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quiet-logins", action="store_true", help="Do not print passwords")

    def handle(self, *args: Any, **options: Any) -> None:
        logins = load_demo_data(settings.DATA_DIR / "demo_credentials.json")
        self.stdout.write(f"Demo data: {len(DOMAINS)} domains with glossaries, {len(logins)} users")
        if options["quiet_logins"]:
            return
        self.stdout.write("Demo logins (user / password):")
        for username, password in logins.items():
            self.stdout.write(f"  {username:16} {password}")
