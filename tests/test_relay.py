"""A generating segment's relay: what the engine queued while the relay was writing goes out
in one statement, in order, numbered without a gap, and the stop is reported after it."""

from __future__ import annotations

import itertools
import queue
import threading
import time
import types
from concurrent.futures import Future

import pytest

from inference.decode import StopInfo
from inference.signals import Alternative, Signals
from inference.sink import TokenEvent
from reviewer import events
from reviewer.models import ReviewSession, SessionEvent
from reviewer.worker import failures, unrecorded_failures
from reviewer.worker import relay as relay_module
from reviewer.worker.relay import EACH_AT_ONCE, Batching, Relay
from tests import conftest
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


def said(position: int, text: str) -> TokenEvent:
    return TokenEvent(position, 100 + position, text, 0, SIGNALS, 0, [])


def recorded_writes(monkeypatch) -> list[tuple[float, list[int]]]:
    """Each token write as it happens: when, and the positions it carried."""
    writes: list[tuple[float, list[int]]] = []
    emit_many = events.emit_many

    def record(session_id, type, payloads):
        writes.append((time.monotonic(), [p["position"] for p in payloads]))
        return emit_many(session_id, type, payloads)

    monkeypatch.setattr(events, "emit_many", record)
    return writes


def wait_for(writes: list, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(writes) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(writes) >= count, writes


def test_it_writes_a_runs_tokens_together_without_holding_the_engine(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    runs = Batching(tokens=3, hold_s=0.4)
    relay = Relay(session, None, lambda state: None, lambda *_: None, batching=runs)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(said(0, "Fever"))
    wait_for(writes, 1)  # the segment's first token goes at once: the generation has begun
    relay.on_token(said(1, " The"))
    relay.on_token(said(2, " patient"))
    time.sleep(0.1)
    assert len(writes) == 1  # held for the rest of the run ...
    assert relay.backlog() == 0  # ... which is not a backlog: the loop does not wait for it
    relay.on_token(said(3, " has"))  # the run is whole: written at once
    wait_for(writes, 2)
    relay.on_token(said(4, " a"))
    first_held = time.monotonic()
    wait_for(writes, 3)  # alone: written once its time is up
    assert writes[2][1] == [4] and writes[2][0] - first_held >= 0.35
    relay.on_token(said(5, " fever"))
    run.set_result(StopInfo("max_tokens", position=6))  # the stop does not wait for the run
    relay.join()
    assert writes[3][1] == [5] and writes[3][0] - writes[2][0] < 0.3
    assert [w for _, w in writes[:2]] == [[0], [1, 2, 3]]
    rows = SessionEvent.objects.filter(session=session, type="token").order_by("seq")
    assert [e.payload["position"] for e in rows] == [0, 1, 2, 3, 4, 5]


def delayed_relay(session: ReviewSession, delay: int | None) -> tuple[Relay, Future[StopInfo]]:
    """A relay following its run that holds runs of up to 50 tokens for 30 s, under delayed
    delivery of ``delay`` sentences (None: nothing leaves before review)."""
    runs = Batching(tokens=50, hold_s=30, delay_sentences=delay)
    relay = Relay(session, None, lambda state: None, lambda *_: None, batching=runs)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    return relay, run


def tell(relay: Relay, texts: list[str], position: int = 0, before: str = "") -> str:
    """Tokens from ``position`` on, each extending the generated text (``before`` so far);
    the text after them."""
    for i, text in enumerate(texts):
        at = position + i
        relay.on_token(TokenEvent(at, 100 + at, text, len(before), SIGNALS, 0, []))
        before += text
    return before


def test_it_writes_at_once_the_token_that_lets_delayed_delivery_send_more(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    relay, run = delayed_relay(session, delay=1)  # without it, nothing would go for 30 s
    text = tell(relay, ["Fever"])
    wait_for(writes, 1)  # the segment's first token, at once
    text = tell(relay, [" since", " Monday", ".", " "], 1, text)
    time.sleep(0.1)
    assert len(writes) == 1  # a complete sentence, but the one being written is held back
    text = tell(relay, [" Cough"], 5, text)  # the next begins: the first may leave now
    wait_for(writes, 2)
    tell(relay, [" since", " Dr", ".", " Lee", " saw", " it"], 6, text)  # "Dr." ends none
    time.sleep(0.1)
    assert len(writes) == 2
    run.set_result(StopInfo("max_tokens", position=12))
    relay.join()
    assert [w for _, w in writes] == [[0], [1, 2, 3, 4, 5], list(range(6, 12))]


def test_it_locks_the_text_a_token_releases_in_the_commit_that_stores_it(alice, monkeypatch):
    """The token that lets delayed delivery send more carries how much may leave, locked for
    the application with it; the tokens before it carry nothing and lock nothing."""
    from inference.sentences import delayed_boundary

    session = make_session(alice, status=ReviewSession.RUNNING)
    locks: list[int] = []
    emit_many = events.emit_many

    def record(session_id, type, payloads):  # the lock as the tokens' own statement sees it
        locks.append(ReviewSession.objects.get(pk=session_id).released_chars)
        return emit_many(session_id, type, payloads)

    monkeypatch.setattr(events, "emit_many", record)
    relay, run = delayed_relay(session, delay=1)
    text = tell(relay, ["Fever"])
    wait_for(locks, 1)  # the segment's first token, at once
    text = tell(relay, [" since", " Monday", ".", " ", " Cough"], 1, text)
    wait_for(locks, 2)
    tell(relay, [" at", " night"], 6, text)
    run.set_result(StopInfo("max_tokens", position=8))
    relay.join()
    boundary = delayed_boundary(text, 1, ())
    assert boundary == len("Fever since Monday.")
    rows = SessionEvent.objects.filter(session=session, type="token").order_by("seq")
    assert [e.payload.get("released") for e in rows] == [None] * 5 + [boundary, None, None]
    assert not events.mismatches("token", rows[5].payload)  # a declared field
    assert ReviewSession.objects.get(pk=session.pk).released_chars == boundary
    assert locks[:2] == [0, boundary]  # locked before the tokens that released it are stored


@pytest.mark.parametrize("status", [ReviewSession.PAUSED, ReviewSession.CANCELLED])
def test_a_session_that_no_longer_runs_stores_released_tokens_unlocked(alice, status):
    """A stream takes a token's ``released`` for a lock: where none can be taken, the token is
    stored without it."""
    from reviewer import lifecycle

    session = make_session(alice, status=status)
    tokens = [events.Encoded({**events.token(said(0, "Fever.")), "released": 6})]
    lifecycle.record_released_tokens(session, tokens)
    row = SessionEvent.objects.get(session=session, type="token")
    assert "released" not in row.payload
    assert ReviewSession.objects.get(pk=session.pk).released_chars == 0


def test_it_holds_a_generation_that_waits_for_review_whatever_its_sentences(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    relay, run = delayed_relay(session, delay=None)  # after review
    text = tell(relay, ["Fever"])
    wait_for(writes, 1)  # the segment's first token, at once
    tell(relay, [".", " Cough", ".", " Rest", "."], 1, text)
    time.sleep(0.2)
    assert len(writes) == 1  # no text leaves before approval: the run waits to be whole
    run.set_result(StopInfo("max_tokens", position=6))
    relay.join()
    assert [w for _, w in writes] == [[0], list(range(1, 6))]


def held_relay(
    session: ReviewSession, watched, hold_s: float = 30
) -> tuple[Relay, Future[StopInfo]]:
    """A relay following its run that writes runs of up to 50 tokens and asks ``watched``
    whether a page follows the session."""
    runs = Batching(tokens=50, hold_s=hold_s)
    relay = Relay(
        session, None, lambda state: None, lambda *_: None, batching=runs, watched=watched
    )
    run: Future[StopInfo] = Future()
    relay.follow(run)
    return relay, run


def test_it_writes_each_token_at_once_while_a_page_follows_the_session(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    followed = [False]
    relay, run = held_relay(session, lambda: followed[0])  # unfollowed, held for 30 s
    relay.on_token(said(0, "Fever"))
    wait_for(writes, 1)  # the segment's first token, at once
    relay.on_token(said(1, " The"))
    relay.on_token(said(2, " patient"))
    time.sleep(0.1)
    assert len(writes) == 1  # nobody reads along: held for the run
    followed[0] = True  # a reviewer opens the session's page
    opened = time.monotonic()
    wait_for(writes, 2)  # what was held goes once the relay asks again, with no token coming
    assert writes[1][0] - opened <= relay_module.WATCH_CHECK_S + 0.15
    relay.on_token(said(3, " has"))
    wait_for(writes, 3)  # and each token from then on as it comes
    relay.on_token(said(4, " a"))
    wait_for(writes, 4)
    assert writes[3][0] - writes[2][0] < 1.0
    run.set_result(StopInfo("max_tokens", position=5))
    relay.join()
    assert [w for _, w in writes] == [[0], [1, 2], [3], [4]]


class CountedWake(threading.Event):
    """The relay's wake-up: how often its thread came back from waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.returns = 0

    def wait(self, timeout: float | None = None) -> bool:
        try:
            return super().wait(timeout)
        finally:
            self.returns += 1


class CountedQueue:
    """The relay's queue: how often its thread came back from waiting for an item."""

    def __init__(self) -> None:
        self.inner: queue.SimpleQueue = queue.SimpleQueue()
        self.returns = 0

    def put(self, item) -> None:
        self.inner.put(item)

    def get_nowait(self):
        return self.inner.get_nowait()

    def get(self, block: bool = True, timeout: float | None = None):
        try:
            return self.inner.get(block, timeout)
        finally:
            self.returns += block


def test_a_held_run_does_not_wake_the_relay_for_each_token(alice, monkeypatch):
    """The engine wakes the relay's thread when a write is due, not for every token: a
    thread woken per token preempts the model's threads on a busy worker."""
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    runs = Batching(tokens=20, hold_s=30)
    relay = Relay(session, None, lambda state: None, lambda *_: None, batching=runs)
    queued, wake = relay._queue, relay._due = CountedQueue(), CountedWake()

    def wakes() -> int:
        return queued.returns + wake.returns

    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(said(0, "Fever"))
    wait_for(writes, 1)  # the segment's first token, at once
    for n in range(1, 16):  # as a busy engine reports them, a step apart
        relay.on_token(said(n, f" w{n}"))
        time.sleep(0.01)
    assert len(writes) == 1 and relay.backlog() == 0  # held, and no backlog for the loop
    assert wakes() <= 4, wakes()  # 16 tokens: the first, the run's first (each woken before: 16)
    for n in range(16, 21):  # the run is whole: the engine wakes it
        relay.on_token(said(n, f" w{n}"))
    wait_for(writes, 2)
    assert wakes() <= 6, wakes()
    run.set_result(StopInfo("max_tokens", position=21))
    relay.join()
    assert [w for _, w in writes] == [[0], list(range(1, 21))]


def test_it_asks_whether_a_page_follows_at_most_every_quarter_second(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)
    asked: list[float] = []

    def watched() -> bool:
        asked.append(time.monotonic())
        return False

    relay, run = held_relay(session, watched)
    for n in range(12):
        relay.on_token(said(n, f" w{n}"))
        time.sleep(0.03)
    run.set_result(StopInfo("max_tokens", position=12))
    relay.join()
    assert 1 <= len(asked) <= 3, asked  # 12 tokens over about 0.4 s
    assert all(b - a >= relay_module.WATCH_CHECK_S for a, b in itertools.pairwise(asked))
    # The first token at once, the rest one run, written with the stop
    assert [w for _, w in writes] == [[0], list(range(1, 12))]


def test_it_never_asks_for_a_session_whose_tokens_go_one_by_one(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)

    def watched() -> bool:
        raise AssertionError("a relay that writes each token at once has nothing to decide")

    relay = Relay(session, None, lambda state: None, lambda *_: None, watched=watched)
    follow_one_token(relay)
    assert relay.failed is None
    assert SessionEvent.objects.filter(session=session, type="token").count() == 1


def test_it_writes_a_run_whose_hold_ran_out_while_it_asked_about_pages(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    writes = recorded_writes(monkeypatch)

    def slow_answer() -> bool:  # Redis slower than the whole hold
        time.sleep(0.1)
        return False

    relay, run = held_relay(session, slow_answer, hold_s=0.05)
    relay.on_token(said(0, "Fever"))
    wait_for(writes, 1)  # the segment's first token, at once
    relay.on_token(said(1, " The"))
    wait_for(writes, 2)  # the hold is over: written, not waited on with a negative timeout
    run.set_result(StopInfo("max_tokens", position=2))
    relay.join()
    assert relay.failed is None and [w for _, w in writes] == [[0], [1]]


def test_it_fails_the_session_when_its_own_thread_breaks_instead_of_stalling_it(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")

    def broken() -> bool:
        raise RuntimeError("a bug in the relay's thread")

    relay, _run = held_relay(session, broken)
    relay.on_token(said(0, "Fever"))  # the segment's first token: written, nothing asked
    conftest.wait_for(lambda: relay._written == 1, what="the first token written")
    relay.on_token(said(1, " The"))  # to be held: the relay asks whether a page follows
    relay.join()  # the thread ended: the loop is not left waiting for its backlog
    assert isinstance(relay.failed, RuntimeError) and relay.backlog() == 0
    with pytest.raises(relay_module.Aborted):
        relay.on_token(said(2, " patient"))  # the run ends at its next token
    session.refresh_from_db()
    assert session.status == ReviewSession.FAILED and session.error == failures.UNEXPECTED


def test_it_batches_gateway_generations_only(alice, settings):
    from reviewer.lifecycle import application_keys
    from reviewer.models.domain import AFTER_REVIEW, DELAYED
    from reviewer.worker.request import relay_batching

    settings.CAESURA_GATEWAY_RELAY_TOKENS, settings.CAESURA_GATEWAY_RELAY_HOLD_MS = 5, 800
    domain = make_session(alice).domain
    app, _key = application_keys.create("Note drafter", [domain], "root")
    started_here = make_session(alice, status=ReviewSession.RUNNING)
    called = make_session(
        None, status=ReviewSession.RUNNING, application=app, gateway={"stop": ["END"]}
    )
    assert relay_batching(started_here) == EACH_AT_ONCE
    for mode, delay, batching in (
        (AFTER_REVIEW, 1, Batching(tokens=5, hold_s=0.8)),  # nothing leaves while it runs
        (DELAYED, 2, Batching(tokens=5, hold_s=0.8, delay_sentences=2, stops=("END",))),
        # The domain streams every token as it comes, each locked as it is stored.
        (DELAYED, 0, Batching(delay_sentences=0, stops=("END",))),
    ):
        domain.delivery_mode, domain.delay_sentences = mode, delay
        domain.save()
        called.refresh_from_db()
        assert relay_batching(called) == batching, (mode, delay)


def follow_one_token(relay: Relay) -> None:
    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(token(0))
    run.set_result(StopInfo("max_tokens", position=1))
    relay.join()


def test_it_writes_the_next_segment_on_the_same_thread_and_connection(alice, monkeypatch):
    from django.db import connection

    from reviewer.worker.relay_threads import threads

    seen: list[tuple[int, int]] = []
    emit_many = events.emit_many

    def noting(session_id, type, payloads):
        written = emit_many(session_id, type, payloads)
        seen.append((threading.get_ident(), connection.connection.info.backend_pid))
        return written

    monkeypatch.setattr(events, "emit_many", noting)
    for _ in range(2):
        session = make_session(alice, status=ReviewSession.RUNNING)
        follow_one_token(Relay(session, None, lambda state: None, lambda *stop: None))
        conftest.wait_for(lambda: threads.idle() > 0, what="the relay's thread back, idle")
    assert len(seen) == 2 and seen[0] == seen[1]  # no new thread, no new connection

    threads.release_idle()  # as before the test database goes
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [seen[0][1]])
        assert cursor.fetchone()[0] == 0


def test_a_run_that_ends_at_a_checkpoint_writes_its_record_once(alice, monkeypatch):
    from reviewer.lifecycle import reports
    from reviewer.lifecycle.record import StoredRecord
    from reviewer.worker import runtime

    session = make_session(alice, status=ReviewSession.RUNNING)
    ids = [100 + p for p in range(relay_module.CHECKPOINT_EVERY)]
    record = StoredRecord(ids, "text", {"attempt": 0})
    written: list[StoredRecord] = []
    store = reports.store_record
    monkeypatch.setattr(
        runtime.lifecycle, "store_record", lambda s, r: (written.append(r), store(s, r))
    )
    # The final save captures the state again: the same record while nothing changed.
    captured = [record]
    monkeypatch.setattr(runtime.record, "stored_record", lambda state: captured[0])

    def finish(stop, halted, notice):
        runtime.save_record(session, None, relay.stored)

    state = types.SimpleNamespace(text="")  # the capture below reads nothing of it
    relay = Relay(session, state, lambda state: record, finish)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    for position in range(relay_module.CHECKPOINT_EVERY):
        relay.on_token(token(position))
    run.set_result(StopInfo("max_tokens", position=relay_module.CHECKPOINT_EVERY))
    relay.join()
    assert relay.stored == record and written == [record]  # the relay's, and no second

    captured[0] = StoredRecord([*ids, 7], "text and more", {"attempt": 0})  # the state moved on
    runtime.save_record(session, None, relay.stored)
    assert written[-1] == captured[0] and len(written) == 2
    session.refresh_from_db()
    assert session.generated_ids == [*ids, 7]


@pytest.mark.parametrize("final", [9, None])
def test_it_locks_the_final_text_with_the_last_tokens_where_it_may_leave_at_once(alice, final):
    """A delayed generation the system approves on its end: its last tokens carry how much of
    the final text may leave, locked in their own commit, before the end is reported; else the
    tokens are written as any other and nothing is locked."""
    session = make_session(alice, status=ReviewSession.RUNNING)
    locked_when_reported: list[int] = []

    def report(stop, halted, notice) -> None:
        row = ReviewSession.objects.get(pk=session.pk)
        locked_when_reported.append(row.released_chars)

    state = types.SimpleNamespace(text="")
    runs = Batching(tokens=8, hold_s=5, delay_sentences=1)
    asked: list[str] = []

    def ending(stop: StopInfo, state) -> int | None:
        asked.append(stop.reason)
        return final

    relay = Relay(session, state, lambda s: None, report, batching=runs, ending=ending)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    for position in range(3):
        relay.on_token(token(position))
    state.text = " t0 t1 t2"
    run.set_result(StopInfo("eos", position=3))
    relay.join()
    rows = SessionEvent.objects.filter(session=session, type="token").order_by("seq")
    payloads = [e.payload for e in rows]
    assert [p["position"] for p in payloads] == [0, 1, 2]
    assert [p.get("released") for p in payloads] == [None, None, final]
    assert asked == ["eos"] and locked_when_reported == [final or 0]
    assert not events.mismatches("token", payloads[-1])  # a declared field


def test_it_asks_nothing_of_the_end_when_the_last_tokens_went_before_it(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    asked: list[str] = []
    relay = Relay(
        session,
        types.SimpleNamespace(text=""),
        lambda s: None,
        lambda *_: None,
        ending=lambda stop, state: asked.append(stop.reason) or 3,
    )
    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(token(0))
    conftest.wait_for(
        lambda: SessionEvent.objects.filter(session=session, type="token").exists(),
        what="the token written",
    )
    run.set_result(StopInfo("eos", position=1))
    relay.join()
    assert asked == []  # no token left to carry it: the end's record releases the text
    assert ReviewSession.objects.get(pk=session.pk).released_chars == 0


def test_it_fails_the_session_on_a_new_connection_when_its_own_broke(alice, monkeypatch):
    from django.db import connection

    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    emit_many = events.emit_many

    def postgres_restarts(session_id, type, payloads):
        if type == events.TOKEN and payloads[0]["position"] == 1:  # Postgres restarted meanwhile
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return emit_many(session_id, type, payloads)

    monkeypatch.setattr(events, "emit_many", postgres_restarts)
    relay = Relay(session, None, lambda state: None, lambda *stop: None)
    run: Future[StopInfo] = Future()
    relay.follow(run)
    relay.on_token(token(0))
    conftest.wait_for(lambda: relay._written == 1, what="the first token written")
    relay.on_token(token(1))
    conftest.wait_for(lambda: relay.failed is not None, what="the write to fail")
    run.set_exception(relay_module.Aborted("the run ends at its next token"))
    relay.join()
    session.refresh_from_db()
    assert session.status == ReviewSession.FAILED and session.error == failures.DATABASE


def test_it_gives_up_recording_a_failure_after_a_bounded_wait(alice, monkeypatch, caplog):
    from django.db import OperationalError

    from reviewer import lifecycle

    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    tries: list[int] = []

    def unreachable(*args):
        tries.append(1)
        raise OperationalError("connection refused")

    monkeypatch.setattr(lifecycle, "fail", unreachable)
    monkeypatch.setattr(relay_module, "FAIL_RETRY_S", (0.0, 0.0, 0.01))
    assert relay_module.record_failure(session.pk, failures.DATABASE, "seg-1") is False
    assert len(tries) == 3 and "could not be recorded" in caplog.text
    assert unrecorded_failures.kept() == [session.pk]  # for the heartbeat to try again
    with pytest.raises(OperationalError):  # Postgres still out: kept for the next beat
        unrecorded_failures.record()
    assert unrecorded_failures.kept() == [session.pk]
    monkeypatch.undo()
    assert unrecorded_failures.record() == 1 and unrecorded_failures.kept() == []
    session.refresh_from_db()
    assert session.status == ReviewSession.FAILED and session.error == failures.DATABASE


def test_a_kept_failure_leaves_a_session_that_a_newer_segment_carries_on(alice):
    """Another worker took the session over during the outage: its failure is not this one's."""
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-2")
    unrecorded_failures.keep(session.pk, failures.DATABASE, "seg-1")
    unrecorded_failures.record()
    session.refresh_from_db()
    assert session.status == ReviewSession.RUNNING and unrecorded_failures.kept() == []


def test_a_segment_task_fails_its_session_on_a_new_connection_when_its_own_broke(
    alice, monkeypatch
):
    from django.db import connection

    from reviewer.worker import runtime, tasks

    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")

    def postgres_restarts(*args):  # the task's connection goes, Postgres is back at once
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    monkeypatch.setattr(runtime, "run_segment", postgres_restarts)
    assert tasks.run_segment.apply((session.pk, "seg-1")).failed()
    session.refresh_from_db()
    assert session.status == ReviewSession.FAILED and session.error == failures.DATABASE
