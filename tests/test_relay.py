"""A generating segment's relay: what the engine queued while the relay was writing goes out
in one statement, in order, numbered without a gap, and the stop is reported after it."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from inference.decode import StopInfo
from inference.signals import Alternative, Signals
from inference.sink import TokenEvent
from reviewer import events
from reviewer.models import ReviewSession, SessionEvent
from reviewer.worker.relay import Relay
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)

SIGNALS = Signals(0.6, 1.2, 0.3, (Alternative(42, " cough", 0.6),), chosen_prob=0.6)


def token(position: int) -> TokenEvent:
    return TokenEvent(position, 100 + position, f" t{position}", 3 * position, SIGNALS, 0, [])


def test_it_writes_what_queued_meanwhile_at_once_in_order(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes: list[list[int]] = []
    writing, go_on = threading.Event(), threading.Event()
    emit_many = events.emit_many

    def slow_first(session_id, type, payloads):
        writes.append([p["position"] for p in payloads])
        if len(writes) == 1:  # Postgres is slow once: the engine goes on meanwhile
            writing.set()
            go_on.wait(10)
        return emit_many(session_id, type, payloads)

    monkeypatch.setattr(events, "emit_many", slow_first)
    stops: list[StopInfo] = []
    relay = Relay(
        session, None, lambda state: None, lambda stop, halted, notice: stops.append(stop)
    )
    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(token(0))
    assert writing.wait(10)
    for position in range(1, 5):
        relay.on_token(token(position))
    assert relay.backlog() == 5  # nothing written yet
    run.set_result(StopInfo("max_tokens", position=5))
    go_on.set()
    relay.join()

    assert writes == [[0], [1, 2, 3, 4]]
    rows = SessionEvent.objects.filter(session=session).order_by("seq")
    assert [(e.seq, e.payload["position"]) for e in rows] == [(n + 1, n) for n in range(5)]
    assert relay.backlog() == 0 and [s.reason for s in stops] == ["max_tokens"]


def test_it_stores_a_new_sessions_prompt_ids_made_in_the_loop(alice):
    from inference.state import DecodeState

    session = make_session(alice, status=ReviewSession.RUNNING)
    relay = Relay(session, None, lambda state: None, lambda stop, halted, notice: None)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    state = DecodeState.__new__(DecodeState)  # only its prompt ids are read
    state.prompt_ids = [7, 8, 9]
    relay.started(state)  # in the loop thread, right after the prefill
    relay.on_token(token(0))
    run.set_result(StopInfo("max_tokens", position=1))
    relay.join()

    session.refresh_from_db()
    assert relay.state is state and session.prompt_ids == [7, 8, 9]
    assert SessionEvent.objects.filter(session=session, type="token").count() == 1
