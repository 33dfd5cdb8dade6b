"""CommitBatch: what a transaction has to send once it commits, gathered into one send.

A generation's end stores three session events and announces two statuses to its domain's
queue in one transaction; each sent on its own costs the sending thread a round trip to Redis
and wakes every listener once more. Items join the send still pending only where a rollback
would take both back: the same savepoints, and its commit hook neither run nor dropped (a
savepoint rolled back drops the hooks registered inside it)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from django.db import connection, transaction

T = TypeVar("T")


class CommitBatch(threading.local, Generic[T]):
    def __init__(self, send: Callable[[list[T]], None]) -> None:
        self.send = send  # the items of one transaction (at once outside one), in order
        self._hook: Callable[[], None] | None = None
        self._items: list[T] = []

    def add(self, items: Iterable[T]) -> None:
        if not connection.in_atomic_block:
            self.send(list(items))
            return
        if self._pending():
            self._items.extend(items)
            return
        batch = list(items)
        self._hook, self._items = (lambda: self.send(batch)), batch
        transaction.on_commit(self._hook)

    def _pending(self) -> bool:
        savepoints: set[Any] = set(connection.savepoint_ids)
        return self._hook is not None and any(
            hook is self._hook and sids == savepoints for sids, hook, *_ in connection.run_on_commit
        )
