"""Which worker processes are alive, as Postgres tells it.

Each worker process holds a shared advisory lock, on a connection of its own, for as long
as it lives. However a process dies (SIGKILL, OOM, a crash), its connection closes and
Postgres releases the lock at once, so a survivor sees the death at its next sweep, a second
later; a busy process never looks dead, since holding a lock needs no beat. Server-side TCP
keepalives on that connection release the lock of a host that vanished without closing it.

Each process start is a new incarnation with an identity of its own (``hostname#id``), which
is what a session's ``worker`` field holds: a worker restarted under the same name (systemd,
a compose restart policy) holds another lock, so what its previous incarnation held counts
as orphaned and is taken back at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from collections.abc import Set as AbstractSet

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

log = logging.getLogger(__name__)

# Made once per process at import; a prefork pool's children inherit it from the parent.
INCARNATION = uuid.uuid4().hex[:12]
SEPARATOR = "#"
LOCK_SPACE = 0x0CAE_5A1E  # first key of the two-key advisory locks on worker incarnations
HOST_SPACE = 0x0CAE_5A1F  # ... and on worker names, held by whichever incarnation runs now
# A host gone without closing its connection: Postgres drops it after about 5 + 3 x 2 s.
KEEPALIVE = {"tcp_keepalives_idle": 5, "tcp_keepalives_interval": 2, "tcp_keepalives_count": 3}

_holder = None  # the connection holding this process's lock, once it holds one


def identity(hostname: str) -> str:
    """This process's name in a session's ``worker`` field."""
    return f"{hostname}{SEPARATOR}{INCARNATION}"


def hostname_of(worker: str) -> str:
    """The Celery hostname (its direct queue) of a worker identity."""
    return worker.split(SEPARATOR, 1)[0]


def lock_key(worker: str) -> int:
    digest = hashlib.sha256(worker.encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def hold(hostname: str) -> bool:
    """Take (or, after the connection was lost, take again) this process's lock; whether it
    had to be taken now."""
    global _holder
    if _holder is not None and _holds(_holder):
        return False
    if _holder is not None:
        log.warning("the connection holding this worker's liveness lock was lost; taking it again")
        _close(_holder)
        _holder = None  # closed, it would reconnect at its next query, without the lock
    _holder = _locked(hostname)
    return True


def _locked(hostname: str) -> BaseDatabaseWrapper:
    """A new connection holding this process's locks."""
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    holder.inc_thread_sharing()  # taken at start-up, checked from the heartbeat thread
    try:
        with holder.cursor() as cursor:
            for name, value in KEEPALIVE.items():
                cursor.execute(f"SET {name} = {int(value)}")
            cursor.execute(
                "SELECT pg_advisory_lock_shared(%s, %s), pg_advisory_lock_shared(%s, %s)",
                [LOCK_SPACE, lock_key(identity(hostname)), HOST_SPACE, lock_key(hostname)],
            )
    except Exception:
        _close(holder)  # half made: not left open until the process ends
        raise
    return holder


def _holds(holder: BaseDatabaseWrapper) -> bool:
    # Asked of the driver's connection: Django's cursor() would open a new one, without the lock.
    try:
        return holder.connection is not None and holder.is_usable()
    except Exception:  # any driver error: the lock went with the connection
        return False


def _close(holder: BaseDatabaseWrapper) -> None:
    with contextlib.suppress(Exception):  # already broken: nothing to close cleanly
        holder.close()


class AliveWorkers:
    """A snapshot of the incarnations alive now; ``identity in alive`` asks about one."""

    def __init__(self, keys: set[int], hosts: AbstractSet[int] = frozenset()) -> None:
        self.keys, self.hosts = keys, hosts

    def __contains__(self, worker: object) -> bool:
        return isinstance(worker, str) and bool(worker) and lock_key(worker) in self.keys

    def runs_under(self, hostname: str) -> bool:
        """Whether some incarnation runs under this name (it serves the name's own queue)."""
        return lock_key(hostname) in self.hosts


def alive() -> AliveWorkers:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT classid::bigint, objid::bigint FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid::bigint IN (%s, %s)"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [LOCK_SPACE, HOST_SPACE],
        )
        rows = cursor.fetchall()
    keys = {key for space, key in rows if space == LOCK_SPACE}
    return AliveWorkers(keys, {key for space, key in rows if space == HOST_SPACE})


def is_alive(worker: str) -> bool:
    return worker in alive()
