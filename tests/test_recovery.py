"""A state rebuilt after a worker died carries what happened since the last checkpoint."""

import pytest

from inference.policies import PolicySet
from reviewer import events
from reviewer.lifecycle import record
from reviewer.models import ReviewSession
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db

POLICY = {
    "name": "terms",
    "kind": "keyword",
    "action": "flag",
    "cooldown": 10,
    "params": {"keywords": ["fever"]},
}


def flag(session, position: int, span: list[int] | None) -> None:
    events.emit(
        session.pk,
        "flag",
        {"position": position, "policy": "terms", "kind": "keyword", "action": "flag",
         "reason": "Matched", "evidence": {}, "span": span, "rollback_to": None},
    )  # fmt: skip


def test_it_adds_the_flags_raised_since_the_checkpoint_to_the_policy_state(alice):
    checkpointed = {"version": 1, "fired": {"terms": [[2, 4, 9]]}}
    session = make_session(
        alice, status=ReviewSession.RUNNING, engine_meta={"policy_state": checkpointed}
    )
    flag(session, 1, [0, 3])  # before the checkpoint: already in its state
    ReviewSession.objects.filter(pk=session.pk).update(ids_seq=1)
    flag(session, 40, [120, 125])  # after it: lost without the replay
    session.refresh_from_db()

    state = record.recovered_policy_state(session)
    assert state["fired"]["terms"] == [[2, 4, 9], [40, 120, 125]]
    policies = PolicySet.from_specs([POLICY])
    policies.load_state_dict(state)
    terms = policies.policies[0]
    assert policies.cooling_down(terms, 45)  # within 10 tokens of the flag at 40
    assert not policies.cooling_down(terms, 51)
    assert policies.already_fired("terms", (120, 125))
    assert session.engine_meta["policy_state"] == checkpointed  # not changed in place


def test_it_starts_from_no_firings_without_a_checkpoint(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    flag(session, 3, None)
    session.refresh_from_db()
    assert record.recovered_policy_state(session)["fired"] == {"terms": [[3, None, None]]}
