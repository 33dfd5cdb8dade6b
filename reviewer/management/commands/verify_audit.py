from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewer.lifecycle.audit import first_broken_record
from reviewer.models import AuditRecord


class Command(BaseCommand):
    help = "Verify the audit hash chain; exits non-zero naming the first broken record."

    def handle(self, *args: Any, **options: Any) -> None:
        broken = first_broken_record()
        if broken is not None:
            record, why = broken
            raise CommandError(f"Audit chain broken at record {record.pk} ({record.action}): {why}")
        self.stdout.write(f"Audit chain intact: {AuditRecord.objects.count()} records")
