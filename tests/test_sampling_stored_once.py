"""A session's seed and token limit are stored once, in ``decoding``; migration 0008 moved the
values of the columns that repeated them there."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from reviewer.models import ReviewSession
from tests.session_factory import make_session

BEFORE = [("reviewer", "0007_pause_model_versions")]


@pytest.mark.django_db
def test_the_seed_and_the_limit_are_read_from_the_decoding(alice):
    session = make_session(alice, seed=7, max_new_tokens=12, decoding={"temperature": 0.5})
    stored = ReviewSession.objects.get(pk=session.pk)
    assert stored.decoding == {"temperature": 0.5, "seed": 7, "max_new_tokens": 12}
    assert (stored.seed, stored.max_new_tokens) == (7, 12)


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_values_of_existing_rows(alice):
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("reviewer")
    try:
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        domain = old.get_model("reviewer", "Domain").objects.create(
            name="Old", slug="old", specialty="medical", system_prompt="Write."
        )
        common = {"owner_id": alice.pk, "domain": domain, "input_text": "x", "model_name": "tiny"}
        sessions = old.get_model("reviewer", "ReviewSession").objects
        both = sessions.create(
            **common, seed=3, max_new_tokens=40, decoding={"seed": 3, "top_k": 5}
        )
        column_only = sessions.create(**common, seed=9, max_new_tokens=64, decoding={"top_k": 5})
    finally:
        # Back to the latest schema, whatever happened: later tests need every column.
        MigrationExecutor(connection).migrate(latest)
    assert ReviewSession.objects.get(pk=both.pk).decoding == {
        "seed": 3,
        "top_k": 5,
        "max_new_tokens": 40,
    }
    moved = ReviewSession.objects.get(pk=column_only.pk)
    assert (moved.seed, moved.max_new_tokens, moved.decoding["top_k"]) == (9, 64, 5)
