"""The session websocket, through the real ASGI application and the Redis channel layer."""

from __future__ import annotations

import asyncio

import pytest
from channels import consumer
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from reviewer import events
from reviewer.events.watching import is_watched
from reviewer.events.watching import key as watched_key
from reviewer.models import AuditRecord, ReviewSession
from reviewer.web import consumers, session_feed
from reviewer.web.health import redis_client
from tests.session_factory import make_session, stub_worker
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
S = ReviewSession


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.fixture(autouse=True)
async def close_thread_connections():
    """The consumer's database thread keeps a connection open; close it so teardown can drop the db."""
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def socket(session_id: int, user=None, query: str = "") -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost")]
    if user is not None:
        headers.append((b"cookie", await session_cookie(user)))
    path = f"/ws/sessions/{session_id}/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(application, path, headers=headers)


emit = database_sync_to_async(events.emit)


async def close_code(communicator: WebsocketCommunicator) -> int:
    output = await communicator.receive_output(timeout=3)
    assert output["type"] == "websocket.close"
    return output["code"]


async def reply_to(communicator: WebsocketCommunicator, message: dict) -> dict:
    """Send a command and return its ack or error, skipping the events it causes."""
    await communicator.send_json_to(message)
    while True:
        received = await communicator.receive_json_from(timeout=3)
        if "command" in received and received["type"] in ("ack", "error"):
            return received


async def test_it_replays_the_missed_events_to_the_owner(alice):
    session = await database_sync_to_async(make_session)(alice)
    for n in range(3):
        await emit(session.pk, "token", {"text": f"t{n}"})
    communicator = await socket(session.pk, alice, "after=1")
    connected, _ = await communicator.connect()
    assert connected
    replayed = [await communicator.receive_json_from(timeout=3) for _ in range(2)]
    assert [e["seq"] for e in replayed] == [2, 3]
    assert replayed[0] == {"type": "token", "seq": 2, "session": session.pk, "text": "t1"}
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_it_replays_everything_for_a_query_that_is_not_utf8(alice):
    # daphne refuses such a query string; another ASGI server may pass it on. The socket
    # must neither fail after joining the session's feed nor stay on it.
    session = await database_sync_to_async(make_session)(alice)
    await emit(session.pk, "token", {"text": "t0"})
    communicator = await socket(session.pk, alice)
    communicator.scope["query_string"] = b"after=\xff"
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(timeout=3))["seq"] == 1
    await communicator.disconnect()
    assert session_feed.watched() == {}


async def test_it_replays_everything_by_default(alice):
    session = await database_sync_to_async(make_session)(alice)
    for n in range(4):
        await emit(session.pk, "token", {"text": f"t{n}"})
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    replayed = [await communicator.receive_json_from(timeout=3) for _ in range(4)]
    assert [e["seq"] for e in replayed] == [1, 2, 3, 4]
    await communicator.disconnect()


async def test_it_replays_a_session_larger_than_a_page_in_pages_without_a_gap(
    alice, settings, monkeypatch
):
    settings.CAESURA_EVENTS_PAGE_BYTES = 10_000
    row = [0.123] * 1000  # an attention row of about 6 kB: a page holds one
    session = await database_sync_to_async(make_session)(alice)
    for n in range(5):
        await emit(session.pk, "token", {"text": f"t{n}", "attention": row})
    pages: list[int] = []
    real = consumers.events_page

    async def counted(session_id: int, after: int, limit: int) -> tuple[list[dict], bool]:
        page, more = await real(session_id, after, limit)
        pages.append(len(page))
        return page, more

    monkeypatch.setattr(consumers, "events_page", counted)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    replayed = [await communicator.receive_json_from(timeout=3) for _ in range(5)]
    assert [e["seq"] for e in replayed] == [1, 2, 3, 4, 5]
    assert replayed[4]["attention"] == row
    assert await communicator.receive_nothing()
    assert pages == [1, 1, 1, 1, 1]  # read a page at a time, never the whole session
    await communicator.disconnect()


async def test_it_closes_the_socket_of_another_reviewer(alice, bob):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, bob)
    await communicator.connect()
    assert await close_code(communicator) == 4404
    await communicator.disconnect()


async def test_it_closes_an_anonymous_socket(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk)
    await communicator.connect()
    assert await close_code(communicator) == 4401
    await communicator.disconnect()


async def test_it_lets_staff_watch_any_session(alice, admin_user):
    session = await database_sync_to_async(make_session)(alice)
    await emit(session.pk, "token", {"text": "t"})
    communicator = await socket(session.pk, admin_user)
    await communicator.connect()
    assert (await communicator.receive_json_from(timeout=3))["seq"] == 1
    await communicator.disconnect()


async def test_it_forwards_live_events_to_that_session_only(alice):
    session = await database_sync_to_async(make_session)(alice)
    other = await database_sync_to_async(make_session)(alice)
    watching, elsewhere = await socket(session.pk, alice), await socket(other.pk, alice)
    await watching.connect()
    await elsewhere.connect()
    await emit(session.pk, "token", {"text": "live"})
    event = await watching.receive_json_from(timeout=3)
    assert event == {"type": "token", "seq": 1, "session": session.pk, "text": "live"}
    assert await elsewhere.receive_nothing()
    await watching.disconnect()
    await elsewhere.disconnect()


async def test_it_marks_the_session_followed_while_a_page_watches_it(alice):
    session = await database_sync_to_async(make_session)(alice)
    await asyncio.to_thread(redis_client().delete, watched_key(session.pk))
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    for _ in range(100):  # the feed marks it as it opens
        if await asyncio.to_thread(is_watched, session.pk):
            break
        await asyncio.sleep(0.02)
    assert await asyncio.to_thread(is_watched, session.pk)
    feed = session_feed._feeds()[session.pk]
    marker = feed.marker
    assert marker is not None and not marker.done()
    await communicator.disconnect()
    await asyncio.sleep(0.05)
    assert marker.done() and feed.marker is None  # the page left: no more renewals
    await asyncio.to_thread(redis_client().delete, watched_key(session.pk))


async def test_it_acknowledges_a_command(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    reply = await reply_to(communicator, {"command": "resume", "command_id": "r1"})
    assert reply == {
        "type": "ack",
        "command": "resume",
        "command_id": "r1",
        "result": {"id": session.pk, "status": "running"},
    }
    await database_sync_to_async(session.refresh_from_db)()
    assert session.status == S.RUNNING
    await communicator.disconnect()


async def test_it_sends_the_events_a_command_causes(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    await communicator.send_json_to({"command": "resume"})
    received = [await communicator.receive_json_from(timeout=3) for _ in range(3)]
    assert {m["type"] for m in received} == {"ack", "resumed", "status"}
    await communicator.disconnect()


async def test_it_answers_a_repeated_command_id_once(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    first = await reply_to(communicator, {"command": "resume", "command_id": "r1"})
    second = await reply_to(communicator, {"command": "resume", "command_id": "r1"})
    assert second["result"] == {**first["result"], "repeated": True}
    count = database_sync_to_async(lambda: AuditRecord.objects.filter(action="resume").count())
    assert await count() == 1
    await communicator.disconnect()


async def test_it_reports_an_invalid_transition(alice):
    session = await database_sync_to_async(make_session)(alice, status=S.RUNNING)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    reply = await reply_to(communicator, {"command": "resume", "command_id": "r2"})
    assert reply == {
        "type": "error",
        "command": "resume",
        "command_id": "r2",
        "message": "Cannot resume a session that is running",
        "status": 409,
    }
    await communicator.disconnect()


async def test_it_reports_bad_input(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    reply = await reply_to(communicator, {"command": "rollback", "position": "three"})
    assert (reply["type"], reply["status"]) == ("error", 400)
    assert (await reply_to(communicator, {"command": "dance"}))["status"] == 400
    await communicator.disconnect()


async def test_it_survives_a_message_that_is_not_json(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    await communicator.send_to(text_data="{oops")
    reply = await communicator.receive_json_from(timeout=3)
    assert (reply["type"], reply["status"]) == ("error", 400)
    assert (await reply_to(communicator, {"command": "pause"}))["status"] == 409
    await communicator.disconnect()


async def test_it_resends_events_on_sync(alice):
    session = await database_sync_to_async(make_session)(alice)
    for n in range(3):
        await emit(session.pk, "token", {"text": f"t{n}"})
    communicator = await socket(session.pk, alice, "after=3")
    await communicator.connect()
    assert await communicator.receive_nothing()
    await communicator.send_json_to({"command": "sync", "after": 1})
    resent = [await communicator.receive_json_from(timeout=3) for _ in range(2)]
    assert [e["seq"] for e in resent] == [2, 3]
    await communicator.disconnect()


async def test_it_drops_a_live_copy_of_an_event_it_already_replayed(alice):
    session = await database_sync_to_async(make_session)(alice)
    for n in range(2):
        await emit(session.pk, "token", {"text": f"t{n}"})
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    assert [(await communicator.receive_json_from(timeout=3))["seq"] for _ in range(2)] == [1, 2]
    layer, group = get_channel_layer(), events.group_name(session.pk)
    for seq in (2, 3):
        await layer.group_send(
            group, {"type": "session.event", "event": {"type": "token", "seq": seq}}
        )
    assert (await communicator.receive_json_from(timeout=3))["seq"] == 3
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_it_forwards_a_run_of_events_in_order_to_every_socket_of_the_session(alice):
    session = await database_sync_to_async(make_session)(alice)
    sockets = [await socket(session.pk, alice) for _ in range(3)]
    for communicator in sockets:
        await communicator.connect()
    await database_sync_to_async(events.emit_many)(
        session.pk, "token", [{"text": "a"}, {"text": "b"}, {"text": "c"}]
    )
    for communicator in sockets:
        received = [await communicator.receive_json_from(timeout=3) for _ in range(3)]
        assert [(e["seq"], e["text"]) for e in received] == [(1, "a"), (2, "b"), (3, "c")]
        assert await communicator.receive_nothing()
        await communicator.disconnect()


async def test_it_drops_the_replayed_events_of_a_live_run(alice):
    session = await database_sync_to_async(make_session)(alice)
    await emit(session.pk, "token", {"text": "t0"})
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    assert (await communicator.receive_json_from(timeout=3))["seq"] == 1
    run = [{"type": "token", "seq": seq} for seq in (1, 2, 3)]
    layer, group = get_channel_layer(), events.group_name(session.pk)
    await layer.group_send(group, {"type": "session.events", "events": run})
    assert [(await communicator.receive_json_from(timeout=3))["seq"] for _ in range(2)] == [2, 3]
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_it_forwards_live_events_without_a_hop_to_the_sync_thread(alice, monkeypatch):
    """Channels closes stale connections in the sync thread before each message it dispatches;
    live events skip that hop (one per socket per token), commands keep it."""
    hops: list[int] = []
    real = consumer.aclose_old_connections

    async def counted() -> None:
        hops.append(1)
        await real()

    monkeypatch.setattr(consumer, "aclose_old_connections", counted)
    session = await database_sync_to_async(make_session)(alice)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    connected = len(hops)
    await database_sync_to_async(events.emit_many)(
        session.pk, "token", [{"text": "a"}, {"text": "b"}]
    )
    await emit(session.pk, "token", {"text": "c"})
    received = [await communicator.receive_json_from(timeout=3) for _ in range(3)]
    assert [e["text"] for e in received] == ["a", "b", "c"]
    assert len(hops) == connected
    reply = await reply_to(communicator, {"command": "resume", "command_id": "r1"})
    assert reply["type"] == "ack"
    assert len(hops) == connected + 1
    await communicator.disconnect()


async def group_members(session_id: int) -> int:
    layer = get_channel_layer()
    key = layer._group_key(events.group_name(session_id))
    return await layer.connection(layer.consistent_hash(key)).zcard(key)


async def test_it_joins_the_sessions_group_once_for_all_its_sockets(alice):
    session = await database_sync_to_async(make_session)(alice)
    # Session ids start again in each test and Redis outlives them: a channel an earlier
    # test's process left in the same group (it expires with the group) is not this feed's.
    before = await group_members(session.pk)
    sockets = [await socket(session.pk, alice) for _ in range(3)]
    for communicator in sockets:
        await communicator.connect()
    assert await group_members(session.pk) == before + 1
    assert session_feed.watched() == {session.pk: 3}
    for communicator in sockets:
        await communicator.disconnect()
    assert await group_members(session.pk) == before
    assert session_feed.watched() == {}


async def test_it_sends_live_events_that_come_during_a_replay_after_it(alice, monkeypatch):
    """An event stored and broadcast while the socket's replay is read waits for the replay:
    the page sees 1, 2, 3 once each, in order."""
    session = await database_sync_to_async(make_session)(alice)
    for n in range(2):
        await emit(session.pk, "token", {"text": f"t{n}"})
    real = consumers.events_page

    async def slow_read(session_id: int, after: int, limit: int) -> tuple[list[dict], bool]:
        stored = await real(session_id, after, limit)
        await emit(session.pk, "token", {"text": "live"})  # broadcast while this read lasts
        await asyncio.sleep(0.3)  # the feed hands it to the socket meanwhile
        return stored

    monkeypatch.setattr(consumers, "events_page", slow_read)
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    received = [await communicator.receive_json_from(timeout=3) for _ in range(3)]
    assert [(e["seq"], e["text"]) for e in received] == [(1, "t0"), (2, "t1"), (3, "live")]
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_it_closes_the_sockets_whose_feed_lost_the_channel_layer(alice, monkeypatch):
    """The page reconnects on the close and replays what it missed; a new socket gets a new
    feed."""
    session = await database_sync_to_async(make_session)(alice)
    layer, lost = get_channel_layer(), set()
    real_open, real_receive = session_feed.Feed.open, layer.receive

    async def open_then_lose(feed) -> None:
        await real_open(feed)
        lost.add(feed.channel)  # before its task first reads

    async def receive(channel: str) -> dict:
        if channel in lost:
            raise ConnectionError("Redis went away")
        return await real_receive(channel)

    monkeypatch.setattr(session_feed.Feed, "open", open_then_lose)
    monkeypatch.setattr(layer, "receive", receive)
    first = await socket(session.pk, alice)
    await first.connect()
    assert await close_code(first) == session_feed.LOST_LAYER
    assert session_feed.watched() == {}
    monkeypatch.setattr(session_feed.Feed, "open", real_open)
    second = await socket(session.pk, alice)
    await second.connect()
    await emit(session.pk, "token", {"text": "after"})
    assert (await second.receive_json_from(timeout=3))["text"] == "after"
    await first.disconnect()
    await second.disconnect()


@database_sync_to_async
def deactivate(user) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


@database_sync_to_async
def log_out_everywhere(user) -> None:
    from django.contrib.sessions.models import Session

    Session.objects.all().delete()  # as a logout deletes the session the socket was opened with


@pytest.mark.parametrize("ended", [deactivate, log_out_everywhere])
async def test_it_closes_an_open_socket_whose_login_is_over_at_its_next_command(alice, ended):
    session = await database_sync_to_async(make_session)(alice, status=S.GENERATED)
    communicator = await socket(session.pk, alice)
    assert (await communicator.connect())[0]
    await ended(alice)
    await communicator.send_json_to({"command": "approve", "comment": "fine"})
    while (output := await communicator.receive_output(timeout=3))["type"] != "websocket.close":
        assert "ack" not in output.get("text", "")
    assert output["code"] == consumers.UNAUTHENTICATED
    assert (await database_sync_to_async(S.objects.get)(pk=session.pk)).status == S.GENERATED


async def test_it_closes_a_listening_socket_whose_login_is_over_at_a_live_event(alice, monkeypatch):
    monkeypatch.setattr(consumers, "USER_CHECK_S", 0.0)  # every event reads the user again
    session = await database_sync_to_async(make_session)(alice, status=S.RUNNING)
    communicator = await socket(session.pk, alice)
    assert (await communicator.connect())[0]
    await deactivate(alice)
    await emit(session.pk, "token", {"text": " unreviewed"})
    output = await communicator.receive_output(timeout=3)
    assert output["type"] == "websocket.close" and output["code"] == consumers.UNAUTHENTICATED
