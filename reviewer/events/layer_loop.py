"""An event loop per thread for talking to the channel layer from synchronous code (a worker's
relay, a view, a Celery task).

``async_to_sync`` called from a thread that runs no event loop starts a thread and an event
loop for the call, and channels_redis opens a Redis connection for that loop and closes it
with the loop: every event broadcast that way paid for all three, and for two hand-overs
between threads. Here each thread that sends keeps one loop (and the layer keeps its Redis
connection on it) and runs the send itself: a send costs its Redis round trips only, and sends
from one thread go out in the order made. A thread that ends calls ``close``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
SEND_TIMEOUT_S = 30  # past the channel layer's own socket timeout: a stuck send, not a slow Redis

_local = threading.local()


def run(coroutine: Coroutine[Any, Any, T], timeout: float = SEND_TIMEOUT_S) -> T:
    """Run ``coroutine`` to its end on this thread's loop: its result, or what it raised
    (``TimeoutError`` after ``timeout`` seconds)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # waiting here would stall that loop (as async_to_sync, refuse)
        coroutine.close()
        raise RuntimeError("an event loop runs in this thread: await the send instead")
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
    return loop.run_until_complete(asyncio.wait_for(coroutine, timeout))


def close() -> None:
    """Close this thread's loop; the channel layer closes its connections on it as it does."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    _local.loop = None
    if loop is not None and not loop.is_closed():
        loop.close()
