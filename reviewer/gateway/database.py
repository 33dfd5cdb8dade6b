"""The gateway's database work, run off the event loop like ``sync_to_async``, handing the
connection back after each call: a call may wait an hour for its review, and the web
server's connections are a pool (webapp/settings.py) that such waits must not drain.

Channels' ``database_sync_to_async`` does the same but also inside a transaction the caller
holds open, which it would break; this leaves such a connection alone."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

P = ParamSpec("P")
T = TypeVar("T")


def off_loop(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(fn)
    def releasing(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                close_old_connections()  # back to the pool (a kept connection stays if fresh)

    return sync_to_async(releasing)
