"""A session's feed over the real Redis channel layer: one group membership per process and
session, every event to every socket in order, a broken socket dropped without starving the rest."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import get_channel_layer

from reviewer import events
from reviewer.web import session_feed

SESSION = 990_001  # no database: the feed only knows the session's group


class Socket:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.texts: list[str] = []
        self.lost = False

    async def deliver(self, event: dict[str, Any], text: str) -> None:
        if self.fails:
            raise OSError("the socket broke")
        self.texts.append(text)

    async def lost_feed(self) -> None:
        self.lost = True


async def broadcast(message: dict[str, Any]) -> None:
    await get_channel_layer().group_send(events.group_name(SESSION), message)


async def until(predicate, timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_it_encodes_each_event_once_and_feeds_every_socket_in_order():
    sockets = [Socket(), Socket()]
    await asyncio.gather(*(session_feed.watch(SESSION, s) for s in sockets))  # one feed opens
    assert session_feed.watched() == {SESSION: 2}
    run = [{"type": "token", "seq": 1, "text": "a"}, {"type": "token", "seq": 2, "text": "b"}]
    await broadcast({"type": "session.events", "events": run})
    await broadcast({"type": "session.event", "event": {"type": "token", "seq": 3}})
    await until(lambda: all(len(s.texts) == 3 for s in sockets))
    assert sockets[0].texts == sockets[1].texts
    assert sockets[0].texts[0] == '{"type": "token", "seq": 1, "text": "a"}'
    assert [t.count('"seq": ') for t in sockets[0].texts] == [1, 1, 1]
    for s in sockets:
        await session_feed.unwatch(SESSION, s)
    assert session_feed.watched() == {}


async def test_it_drops_a_socket_that_fails_and_keeps_feeding_the_others():
    broken, fine = Socket(fails=True), Socket()
    await session_feed.watch(SESSION, broken)
    await session_feed.watch(SESSION, fine)
    await broadcast({"type": "session.event", "event": {"type": "token", "seq": 1}})
    await broadcast({"type": "session.event", "event": {"type": "token", "seq": 2}})
    await until(lambda: len(fine.texts) == 2)
    assert session_feed.watched() == {SESSION: 1}
    assert broken.lost and not fine.lost  # closed: its page reconnects and replays
    await session_feed.unwatch(SESSION, fine)
    await session_feed.unwatch(SESSION, broken)  # already dropped: nothing to do
    assert session_feed.watched() == {}


async def test_it_ignores_a_message_of_another_kind():
    fine = Socket()
    await session_feed.watch(SESSION, fine)
    await broadcast({"type": "something.else", "x": 1})
    await broadcast({"type": "session.event", "event": {"type": "token", "seq": 1}})
    await until(lambda: len(fine.texts) == 1)
    await session_feed.unwatch(SESSION, fine)


async def test_it_closes_even_when_its_receive_drops_a_cancel(monkeypatch):
    """A cancel dropped inside the layer (Python 3.11's ``wait_for``, in redis-py's send) must
    not leave the last socket's close waiting: the feed asks again."""
    fine = Socket()
    await session_feed.watch(SESSION, fine)
    feed_layer = get_channel_layer()
    real_receive = feed_layer.receive

    async def dropping_the_first_cancel(channel: str) -> dict[str, Any]:
        try:
            return await real_receive(channel)
        except asyncio.CancelledError:
            await asyncio.Event().wait()  # runs on, as a receive that lost its cancel did
            raise

    monkeypatch.setattr(feed_layer, "receive", dropping_the_first_cancel)
    await broadcast({"type": "session.event", "event": {"type": "token", "seq": 1}})
    await until(lambda: len(fine.texts) == 1)  # the feed now waits in the patched receive
    await asyncio.wait_for(session_feed.unwatch(SESSION, fine), 2)
    assert session_feed.watched() == {}
