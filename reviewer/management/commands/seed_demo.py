from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from reviewer.demo.credentials import describe
from reviewer.demo.demo_data import DOMAINS
from reviewer.demo.loading import load_demo_data


class Command(BaseCommand):
    help = "Load the demo domains, glossaries, users and application into this database, once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--quiet-logins", action="store_true", help="Do not print passwords and keys"
        )
        parser.add_argument(
            "--base-url", default="http://127.0.0.1:8000", help="Where the example call goes"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        demo = load_demo_data(settings.DATA_DIR / "demo_credentials.json")
        users, apps = len(demo["logins"]), len(demo["applications"])
        self.stdout.write(
            f"Demo data: {len(DOMAINS)} domains with glossaries, {users} users, {apps} application"
        )
        if not options["quiet_logins"]:
            self.stdout.write("\n".join(describe(demo, options["base_url"])))
