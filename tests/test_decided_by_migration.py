"""Upgrading keeps what the chain knows: a decided session learns who decided it from its
decision's record (the system's approval names nobody), and a session from before the
classifier's version was kept has none, so that no version's accuracy counts it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from reviewer.models import ReviewSession

BEFORE = [("reviewer", "0019_audit_record_keeps_its_session")]


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_reads_each_decider_from_the_chain(alice):
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("reviewer")
    try:
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        domain = old.get_model("reviewer", "Domain").objects.create(
            name="Old", slug="old", specialty="medical", system_prompt="Write."
        )
        sessions = old.get_model("reviewer", "ReviewSession").objects
        records = old.get_model("reviewer", "AuditRecord").objects
        common = {"domain": domain, "input_text": "x", "model_name": "tiny"}
        made = {}
        for name, status, actor in (
            ("by_bob", "completed", "bob"),
            ("by_system", "completed", "system"),
            ("rejected", "rejected", "carol"),
            ("paused", "paused", None),
        ):
            made[name] = sessions.create(**common, status=status, task_source="classifier")
            if actor is not None:
                action = "approve" if status == "completed" else "reject"
                records.create(
                    session=made[name],
                    actor=actor,
                    action=action,
                    created_at=timezone.now(),
                    prev_hash="0" * 64,
                    hash=f"{made[name].pk:064d}",
                )
    finally:
        # Back to the latest schema, whatever happened: later tests need every column.
        MigrationExecutor(connection).migrate(latest)
    stored = {name: ReviewSession.objects.get(pk=s.pk) for name, s in made.items()}
    assert {name: s.decided_by for name, s in stored.items()} == {
        "by_bob": "bob",
        "by_system": "",
        "rejected": "carol",
        "paused": "",
    }
    assert {s.task_classifier_version for s in stored.values()} == {None}
    assert stored["by_bob"].reviewer_name == "bob"
