"""A delayed gateway generation that the system approves on its end sends its held last
sentence with its last tokens (reviewer/worker/request.py ``final_release``, the relay, the
delivery), not after the end's record: only where its domain approves it unpaused, only when
the run ended by itself and no cancel waits, and never more than the final text."""

from __future__ import annotations

import asyncio
import types

import pytest

from inference.decode import StopInfo
from reviewer.models import ReviewSession
from reviewer.models.domain import AFTER_REVIEW, DELAYED
from reviewer.worker import request
from tests.floor_factory import note_drafter
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)
S = ReviewSession
TEXT = "One. Two.\nEND three"


def gateway_session(alice, status: str = S.RUNNING, **domain) -> S:
    session = make_session(alice, status=status)
    S.objects.filter(pk=session.pk).update(
        owner=None, application=note_drafter(), gateway={"stop": ["\nEND"]}
    )
    settings = {"delivery_mode": DELAYED, "delay_sentences": 1, "auto_approve_unpaused": True}
    for name, value in {**settings, **domain}.items():
        setattr(session.domain, name, value)
    session.domain.save()
    return S.objects.select_related("domain").get(pk=session.pk)


def control(waiting: str | None = None, fails: bool = False):
    def read() -> str | None:
        if fails:
            raise ConnectionError("Redis is away")
        return waiting

    return types.SimpleNamespace(waiting=read)


STATE = types.SimpleNamespace(text=TEXT)


@pytest.mark.parametrize(
    ("reason", "chars"),
    [("eos", len(TEXT)), ("max_tokens", len(TEXT)), ("stop", len("One. Two.")), ("pause", None)],
)
def test_it_releases_the_final_text_of_a_run_that_ended_by_itself(alice, reason, chars):
    ending = request.final_release(gateway_session(alice), control())
    assert ending(StopInfo(reason, position=3), STATE) == chars


@pytest.mark.parametrize(
    "control_now", [control("cancel"), control(fails=True)], ids=["cancel", "redis"]
)
def test_it_leaves_the_end_to_its_record_when_a_cancel_may_wait(alice, control_now):
    ending = request.final_release(gateway_session(alice), control_now)
    assert ending(StopInfo("eos", position=3), STATE) is None


@pytest.mark.parametrize(
    "domain",
    [{"auto_approve_unpaused": False}, {"delivery_mode": AFTER_REVIEW}],
    ids=["a-reviewer-approves", "after-review"],
)
def test_it_releases_nothing_early_that_waits_for_a_reviewer(alice, domain):
    ending = request.final_release(gateway_session(alice, **domain), control())
    assert ending(StopInfo("eos", position=3), STATE) is None


def test_it_releases_nothing_early_of_a_generation_that_paused_before(alice):
    paused_once = gateway_session(alice, status=S.PAUSED)  # it has a pause on record
    S.objects.filter(pk=paused_once.pk).update(status=S.RUNNING)
    ending = request.final_release(S.objects.get(pk=paused_once.pk), control())
    assert ending(StopInfo("eos", position=3), STATE) is None


def test_it_asks_the_database_nothing_as_the_generation_starts(alice, django_assert_num_queries):
    """Whether the system approves it is asked as the run ends: its start (the way to its
    first token) costs no statement."""
    session = gateway_session(alice)
    with django_assert_num_queries(0):
        ending = request.final_release(session, control())
    assert ending(StopInfo("eos", position=3), STATE) == len(TEXT)


def test_it_releases_nothing_early_of_a_reviewers_own_session(alice):
    own = make_session(alice, status=S.RUNNING)
    assert request.final_release(own, control())(StopInfo("eos", position=3), STATE) is None


def test_the_stream_sends_the_final_text_the_last_tokens_locked_without_locking_again(
    alice, monkeypatch
):
    """The worker stored the last tokens with the final text locked (the session still runs:
    its end is not recorded yet). The stream sends the held last sentence at once, trusting
    that lock (no statement of its own), and ends once the approval is recorded."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from reviewer.gateway.delivery import Delivery, End, Piece
    from reviewer.gateway.progress import Follower, Row
    from reviewer.lifecycle import gateway
    from reviewer.lifecycle.record import Token

    final = "One. Two."
    session = gateway_session(alice)
    S.objects.filter(pk=session.pk).update(text=final, released_chars=len(final))
    follower = Follower(session.pk)
    follower.row = Row("running", "", len("One."), "", "")
    follower.tokens = [Token(0, "One."), Token(1, " Two.")]
    follower.locked = len(final)  # as the last token event said
    monkeypatch.setattr(gateway, "release", lambda *a: pytest.fail("locked again"))
    delivery = Delivery(follower, DELAYED, 1, max_wait_s=60, sent=0)

    async def first_steps():
        try:
            piece = await delivery._release()
            follower.row = Row("completed", final, len(final), "", "")
            return piece, delivery._ended()
        finally:
            await sync_to_async(connections.close_all)()

    piece, end = asyncio.run(first_steps())
    assert isinstance(piece, Piece) and piece.text == final  # the held sentence, at once
    assert end == End("completed")
