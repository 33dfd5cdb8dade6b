"""A session's live events, fanned out to every socket of this web process that watches it.

Each socket used to join the session's channel-layer group itself. For every token, every
socket's own task then woke, took its copy from the layer's buffer, and was dispatched:
about twice the CPU of the send itself (0.25 against 0.13 ms a socket and token, measured in
a bare daphne with 20 sockets). With 20 watchers that was about a tenth of a core, on the
cores the model decodes on. A feed joins the group once per process and session, encodes
each event once and hands it to each socket in order, in its own task.

A socket that is sending a replay keeps the live events handed to it meanwhile and sends
them after the replay, skipping those the replay covered (reviewer/web/consumers.py). A
socket that cannot take an event, or all of a feed's sockets when the feed loses the
channel layer, are closed: pages reconnect and replay what they missed, as they did when a
socket's own receive failed.

While a feed has sockets it keeps its session marked as followed (reviewer/events/watching.py),
so that a worker writes the session's tokens one by one for the pages reading along."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from channels.layers import get_channel_layer

from reviewer import events
from reviewer.events import watching
from reviewer.events.channel_layer import cancel_receive

log = logging.getLogger(__name__)

LOST_LAYER = 1011  # the close code when the feed's channel layer fails: reconnect and replay


class Watcher(Protocol):
    async def deliver(self, event: dict[str, Any], text: str) -> None: ...

    async def lost_feed(self) -> None: ...


class Feed:
    """One session's group membership in this process, and the sockets it feeds."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.watchers: list[Watcher] = []  # in the order they joined
        self.layer = get_channel_layer()
        self.channel = ""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None
        self.marker: asyncio.Task[None] | None = None

    async def open(self) -> None:
        if self.layer is None:
            raise RuntimeError("no channel layer is configured")
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(events.group_name(self.session_id), self.channel)
        self.task = asyncio.ensure_future(self._forward())
        self.marker = asyncio.ensure_future(self._keep_marked())

    async def close(self) -> None:
        await self._stop_marking()
        if self.task is not None:
            # Its receive must end before this loop can: the layer counts the loop's receivers.
            await cancel_receive(self.task)
        await self._leave()

    async def _keep_marked(self) -> None:
        """Mark the session as followed, and renew the mark, for as long as this feed lives."""
        while True:
            try:
                await asyncio.to_thread(watching.mark, self.session_id)
            except Exception as exc:  # the worker then writes in runs: later, never lost
                log.info("session %s: could not mark it followed (%s)", self.session_id, exc)
            await asyncio.sleep(watching.REFRESH_S)

    async def _stop_marking(self) -> None:
        marker, self.marker = self.marker, None
        if marker is not None:
            marker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await marker

    async def _leave(self) -> None:
        if self.layer is None or not self.channel:
            return
        try:
            await self.layer.group_discard(events.group_name(self.session_id), self.channel)
        except Exception as exc:  # Redis gone: the membership lapses with the group's expiry
            log.info("session %s: feed left its group uncleanly (%s)", self.session_id, exc)

    def drop(self, watcher: Watcher) -> bool:
        """Stop feeding ``watcher``; whether that was the last one (the feed is then
        forgotten at once, so that a new socket opens a feed of its own)."""
        if watcher in self.watchers:
            self.watchers.remove(watcher)
            if not self.watchers:
                forget(self)
                return True
        return False

    async def _forward(self) -> None:
        assert self.layer is not None
        try:
            while True:
                message = await self.layer.receive(self.channel)
                for event, text in encoded(message):
                    for watcher in list(self.watchers):
                        await self._deliver(watcher, event, text)
                if not self.watchers:  # the last socket failed as it was fed
                    await self._stop_marking()
                    await self._leave()
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("session %s: live events lost the channel layer (%s)", self.session_id, exc)
            await self._lose()

    async def _deliver(self, watcher: Watcher, event: dict[str, Any], text: str) -> None:
        try:
            await watcher.deliver(event, text)
        except Exception:  # one broken socket must not starve the others
            log.exception("session %s: a socket could not take a live event", self.session_id)
            self.drop(watcher)
            await close_quietly(watcher, self.session_id)

    async def _lose(self) -> None:
        forget(self)
        await self._stop_marking()
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            await close_quietly(watcher, self.session_id)
        await self._leave()


async def close_quietly(watcher: Watcher, session_id: int) -> None:
    """Close a socket the feed no longer feeds, so that its page reconnects and replays."""
    try:
        await watcher.lost_feed()
    except Exception:
        log.exception("session %s: a socket could not be closed", session_id)


def encoded(message: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """A group message's events (one, or a run stored at once), each with its JSON text."""
    kind = message.get("type")
    if kind == "session.event":
        batch = [message["event"]]
    elif kind == "session.events":
        batch = list(message["events"])
    else:
        log.warning("session feed: message of unknown type %r ignored", kind)
        return
    for event in batch:
        yield event, json.dumps(event)


# Feeds by event loop, then session: each loop has its own channel-layer connections.
_FEEDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Feed]] = (
    weakref.WeakKeyDictionary()
)


def _feeds() -> dict[int, Feed]:
    return _FEEDS.setdefault(asyncio.get_running_loop(), {})


def forget(feed: Feed) -> None:
    feeds = _feeds()
    if feeds.get(feed.session_id) is feed:
        del feeds[feed.session_id]


async def watch(session_id: int, watcher: Watcher) -> None:
    """Feed ``watcher`` the session's live events from now on; it returns once the feed
    is in the group, so that nothing stored after this returns can be missed."""
    feeds = _feeds()
    while (feed := feeds.get(session_id)) is not None:
        await asyncio.shield(feed.ready)  # another socket is opening it
        if feeds.get(session_id) is feed:  # and it was not lost meanwhile
            feed.watchers.append(watcher)
            return
    feed = feeds[session_id] = Feed(session_id)
    try:
        await feed.open()
    except BaseException:
        forget(feed)  # the sockets waiting for it try for themselves
        raise
    else:
        feed.watchers.append(watcher)
    finally:
        feed.ready.set_result(None)


async def unwatch(session_id: int, watcher: Watcher) -> None:
    feed = _feeds().get(session_id)
    if feed is not None and feed.drop(watcher):
        await feed.close()


def watched() -> dict[int, int]:
    """Sockets per session fed in this loop (for tests and diagnostics)."""
    return {sid: len(feed.watchers) for sid, feed in _feeds().items()}
