"""Create or rotate a user's API token and print the key (only its digest is stored)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.web.auth import issue_token


class Command(BaseCommand):
    help = "Create or rotate USERNAME's API token and print the new key; the old key stops working."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}")
        if not user.is_active:  # the API refuses an inactive user's key: none is made for them
            raise CommandError(
                f"{username!r} is inactive: the API refuses an inactive user's token;"
                " activate the user in the admin first"
            )
        self.stdout.write(issue_token(user, "create_api_token"))  # the audit's actor
