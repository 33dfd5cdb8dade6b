from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewer.web.preflight import ServiceUnavailable, check_redis, ensure_database


class Command(BaseCommand):
    help = "Check that PostgreSQL and Redis answer, and create the database if it is missing."

    def handle(self, *args: Any, **options: Any) -> None:
        problems = []
        for step in (ensure_database, check_redis):
            try:
                self.stdout.write(step())
            except ServiceUnavailable as exc:
                problems.append(str(exc))
        if problems:
            raise CommandError("\n".join(problems))
