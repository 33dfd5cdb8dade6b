from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewer.lifecycle import audit_graph
from reviewer.lifecycle.audit import first_broken_record
from reviewer.models import AuditGraph, AuditRecord


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain and every audit graph against the digest the chain holds"
        " for it; exits non-zero naming the first broken record and each altered graph."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        problems = []
        broken = first_broken_record()
        if broken is not None:
            record, why = broken
            problems.append(f"Audit chain broken at record {record.pk} ({named(record)}): {why}")
        problems += audit_graph.tampered()
        if problems:
            raise CommandError("\n".join(problems))
        records, graphs = AuditRecord.objects.count(), AuditGraph.objects.count()
        self.stdout.write(f"Audit chain intact: {records} records, {graphs} graphs")


def named(record: AuditRecord) -> str:
    """The record's action; for a graph's record, the pause (or event) it explains."""
    if record.action == audit_graph.ACTION:
        return f"{record.action}: {audit_graph.describe_payload(record)}"
    return record.action
