"""The shared fold cases (tests/fold_vectors.json, which the page's fold passes too under
`node --test`): each is a log of events as declared, and the worker's fold of the events after
a checkpoint gives the case's tokens (an edit checkpoints the ids it leaves)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewer import events, worker
from reviewer.models import SessionEvent
from tests.session_factory import make_session

VECTORS = json.loads((Path(__file__).parent / "fold_vectors.json").read_text())
EDITS = (events.EDITED, events.TRUNCATED)


def payload(event: dict) -> dict:
    return {k: v for k, v in event.items() if k not in ("type", "seq")}


@pytest.mark.parametrize("case", VECTORS, ids=[case["name"] for case in VECTORS])
def test_every_event_is_of_a_declared_kind(case):
    for event in case["events"]:
        assert events.mismatches(event["type"], payload(event)) == []


@pytest.mark.django_db
@pytest.mark.parametrize("case", VECTORS, ids=[case["name"] for case in VECTORS])
def test_the_worker_folds_each_case_to_its_tokens(case, alice):
    session = make_session(alice)
    SessionEvent.objects.filter(session=session).delete()
    session.generated_ids, session.ids_seq = [], 0
    for event in case["events"]:
        SessionEvent.objects.create(
            session=session, seq=event["seq"], type=event["type"], payload=payload(event)
        )
        if event["type"] in EDITS:  # the worker checkpoints an applied edit
            session.generated_ids, session.ids_seq = event["token_ids"], event["seq"]
    assert worker.recovered_ids(session) == case["tokens"]
