"""Whether a socket's reader keeps up with what the server sends it.

Under daphne every frame sent goes into the connection's send buffer, which grows without
limit while the reader takes less than the session writes (a phone on a slow network): a
long session's tokens, each with its attention row, would pile up in the web process's
memory, once for every such socket. Twisted tells a producer registered on the connection
when that buffer passes its limit (64 KiB) and when it has drained. A session socket then
stops sending live events and, once the buffer drained, catches up from the event store, a
page at a time, as a reconnecting page does (reviewer/web/consumers.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class Pace:
    """A streaming producer in Twisted's sense (IPushProducer): told to pause and resume."""

    def __init__(self) -> None:
        self._clear = asyncio.Event()
        self._clear.set()

    @property
    def behind(self) -> bool:
        return not self._clear.is_set()

    async def drained(self) -> None:
        await self._clear.wait()

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's name
        self._clear.clear()

    def resumeProducing(self) -> None:  # noqa: N802
        self._clear.set()

    def stopProducing(self) -> None:  # noqa: N802 - the connection is gone: nobody waits
        self._clear.set()


def attach(send: Callable[..., Any]) -> Pace | None:
    """The pace of the connection ``send`` answers on; None where the server gives no way to
    know it (an ASGI server other than daphne, or a test's in-memory socket): the socket then
    sends as it always did."""
    transport = getattr(server_protocol(send), "transport", None)
    # daphne hands the upgraded connection to the websocket, but Twisted's HTTP channel stays
    # the connection's producer: it passes its pauses on to one registered with it.
    target = getattr(transport, "producer", None) or transport
    register = getattr(target, "registerProducer", None)
    if register is None:
        return None
    pace = Pace()
    try:
        register(pace, True)
    except RuntimeError:  # another producer is registered: its owner paces the connection
        return None
    return pace


def server_protocol(send: Callable[..., Any]) -> object | None:
    """The daphne connection behind ``send``: daphne hands an application
    ``partial(server.handle_reply, protocol)``, which channels' session middleware wraps."""
    for _ in range(8):
        args = getattr(send, "args", None)
        if args:
            protocol: object = args[0]
            return protocol
        inner = getattr(getattr(send, "__self__", None), "real_send", None)
        if inner is None:
            return None
        send = inner
    return None
