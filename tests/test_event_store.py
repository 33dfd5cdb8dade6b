"""Storing and sending session events: a run of events is numbered one after another in one
statement, sent after the commit as one message of the real Redis channel layer, and never
sent when its transaction rolls back; the per-thread event loop that sends them."""

from __future__ import annotations

import threading

import pytest
from channels.layers import get_channel_layer
from django.db import transaction

from reviewer import events
from reviewer.events import layer_loop
from reviewer.models import ReviewSession, SessionEvent
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener():
    """A channel of the real layer, in a session's group: ``(join(session), receive())``."""
    layer = get_channel_layer()
    channel = layer_loop.run(layer.new_channel())

    def join(session_id: int) -> None:
        layer_loop.run(layer.group_add(events.group_name(session_id), channel))

    def receive() -> dict:
        return layer_loop.run(layer.receive(channel), timeout=5)

    return join, receive


def seqs_and_texts(session: ReviewSession) -> list[tuple[int, str]]:
    rows = SessionEvent.objects.filter(session=session).order_by("seq")
    return [(e.seq, e.payload["text"]) for e in rows]


def test_it_numbers_a_run_of_events_after_the_last_one(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    events.emit(session.pk, "token", {"text": "a"})
    stored = events.emit_many(session.pk, "token", [{"text": "b"}, {"text": "c"}, {"text": "d"}])
    assert [e.seq for e in stored] == [2, 3, 4]
    assert seqs_and_texts(session) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    session.refresh_from_db()
    assert session.last_seq == 4
    row = SessionEvent.objects.get(session=session, seq=3)
    assert row.created_at == stored[1].created_at and row.pk == stored[1].pk


def test_it_stores_a_payload_encoded_ahead_as_its_text(alice):
    """A relay encodes each token as it takes it; the write does not encode it again."""
    session = make_session(alice, status=ReviewSession.RUNNING)
    ahead = events.Encoded({"text": "b"})
    assert ahead == {"text": "b"} and ahead.text == '{"text": "b"}'
    ahead.text = '{"text": "as encoded"}'
    stored = events.emit_many(session.pk, "token", [ahead, {"text": "c"}])
    assert seqs_and_texts(session) == [(1, "as encoded"), (2, "c")]
    assert [type(e.payload) for e in stored] == [dict, dict]  # sent as plain dicts


def test_it_sends_a_run_as_one_message_once_stored(alice, listener):
    join, receive = listener
    session = make_session(alice, status=ReviewSession.RUNNING)
    join(session.pk)
    events.emit(session.pk, "token", {"text": "a"})
    assert receive() == {
        "type": "session.event",
        "event": {"type": "token", "seq": 1, "session": session.pk, "text": "a"},
    }
    events.emit_many(session.pk, "token", [{"text": "b"}, {"text": "c"}])
    message = receive()
    assert message["type"] == "session.events"
    assert [(e["seq"], e["text"]) for e in message["events"]] == [(2, "b"), (3, "c")]


def test_it_sends_nothing_and_numbers_nothing_when_the_transaction_rolls_back(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING)
    sent: list = []
    monkeypatch.setattr(events, "broadcast_all", sent.append)
    with pytest.raises(RuntimeError), transaction.atomic():
        events.emit_many(session.pk, "token", [{"text": "lost"}, {"text": "too"}])
        assert sent == []  # not before the commit
        raise RuntimeError("the command failed")
    assert sent == [] and seqs_and_texts(session) == []
    session.refresh_from_db()
    assert session.last_seq == 0
    events.emit(session.pk, "token", {"text": "next"})
    assert seqs_and_texts(session) == [(1, "next")] and len(sent) == 1


def test_it_sends_what_one_transaction_stores_as_one_message(alice, listener):
    join, receive = listener
    session = make_session(alice, status=ReviewSession.RUNNING)
    join(session.pk)
    with transaction.atomic():  # a generation's end: its statuses and its finish
        events.emit(session.pk, "status", {"status": "generated"})
        events.emit(session.pk, "finish", {"reason": "length", "text": "t"})
        with transaction.atomic():  # a savepoint that holds: its events join the message
            pass
        events.emit(session.pk, "status", {"status": "completed"})
    message = receive()
    assert message["type"] == "session.events"
    assert [(e["seq"], e["type"]) for e in message["events"]] == [
        (1, "status"),
        (2, "finish"),
        (3, "status"),
    ]
    events.emit(session.pk, "token", {"text": "a"})  # the next transaction: a message of its own
    assert receive()["event"]["seq"] == 4


def test_it_never_sends_what_a_savepoint_rolled_back(alice, listener):
    join, receive = listener
    session = make_session(alice, status=ReviewSession.RUNNING)
    join(session.pk)
    with transaction.atomic():
        events.emit(session.pk, "token", {"text": "kept"})
        with pytest.raises(RuntimeError), transaction.atomic():
            events.emit(session.pk, "token", {"text": "lost"})
            raise RuntimeError("a step failed")
        events.emit(session.pk, "token", {"text": "after"})
    sent = [receive(), receive()]
    texts = [(m["event"]["seq"], m["event"]["text"]) for m in sent]
    assert texts == [(1, "kept"), (2, "after")]
    assert seqs_and_texts(session) == [(1, "kept"), (2, "after")]


def test_it_refuses_a_session_that_does_not_exist():
    with pytest.raises(ReviewSession.DoesNotExist):
        events.emit_many(123456, "token", [{"text": "x"}])


def test_it_refuses_a_kind_outside_the_protocol(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    with pytest.raises(AssertionError):
        events.emit_many(session.pk, "tokens", [{"text": "x"}])


def test_each_thread_sends_from_its_own_loop_until_it_closes_it():
    async def which_loop():
        import asyncio

        return asyncio.get_running_loop()

    first, again = layer_loop.run(which_loop()), layer_loop.run(which_loop())
    assert first is again and not first.is_running()
    other: list = []
    thread = threading.Thread(target=lambda: other.append(layer_loop.run(which_loop())))
    thread.start()
    thread.join()
    assert other[0] is not first
    layer_loop.close()
    assert first.is_closed() and layer_loop.run(which_loop()) is not first
    layer_loop.close()


async def test_it_refuses_to_wait_inside_a_running_event_loop():
    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="await"):
        layer_loop.run(nothing())


def test_it_sends_queue_messages_from_the_threads_own_loop(monkeypatch):
    """A queue message, like a session event, costs its Redis round trips only: no thread,
    event loop or connection of its own (``async_to_sync`` started all three per message)."""
    import asyncio

    from reviewer.events import queue

    layer, sent = get_channel_layer(), []

    async def group_send(group: str, message: dict) -> None:
        sent.append((group, message["event"]["session"], asyncio.get_running_loop()))

    monkeypatch.setattr(layer, "group_send", group_send)
    started, start = [], threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for session in (1, 2):
        queue.send({"type": queue.QUEUE, "session": session, "domain": 7, "status": "paused",
                    "claimed_by": None, "action": "status"})  # fmt: skip
    assert [s[:2] for s in sent] == [(queue.group_name(7), 1), (queue.group_name(7), 2)]
    assert sent[0][2] is sent[1][2] and not sent[0][2].is_closed()
    assert started == []
    layer_loop.close()


def test_it_announces_a_transactions_last_status_of_each_session_once(monkeypatch):
    from reviewer.events import queue
    from reviewer.lifecycle.transitions import set_status
    from tests.floor_factory import gateway_session

    one, two = (gateway_session(ReviewSession.RUNNING) for _ in range(2))
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(queue, "send", lambda m: sent.append((m["session"], m["status"])))
    with transaction.atomic():  # a generation's end with the system's approval
        set_status(one, ReviewSession.GENERATED)
        set_status(two, ReviewSession.PAUSED)
        set_status(one, ReviewSession.COMPLETED)
        assert sent == []  # not before the commit
    assert sent == [(one.pk, ReviewSession.COMPLETED), (two.pk, ReviewSession.PAUSED)]
    with pytest.raises(RuntimeError), transaction.atomic():
        set_status(two, ReviewSession.RUNNING)
        raise RuntimeError("the command failed")
    assert len(sent) == 2  # a rolled-back change is never announced
