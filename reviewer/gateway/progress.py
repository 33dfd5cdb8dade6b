"""Following one session from an async view: its stored events (SessionEvent, numbered per
session) folded into its tokens, its status, and, once it waits or ends, its row.

The follower joins the session's channel-layer group before its first read, so no event
falls between the two; it then applies each broadcast event that is the next in sequence
as it arrives and reads the stored events after the last one it has whenever one is
missing (the channel layer delivers at most once). Reads of the database go through
``off_loop`` (reviewer/gateway/database.py), which hands the connection back after each. No
step waits on a timer to notice progress."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from channels.layers import BaseChannelLayer, get_channel_layer
from django.db.models import JSONField
from django.db.models.expressions import RawSQL

from reviewer import events
from reviewer.events.channel_layer import cancel_receive
from reviewer.gateway.database import off_loop
from reviewer.lifecycle.record import Token, apply, text_of
from reviewer.models import ReviewSession, SessionEvent, statuses

log = logging.getLogger(__name__)

# Without a channel layer (Redis out of reach) the follower reads the events this often.
POLL_S = 0.5


@dataclass
class Row:
    """What the gateway reads of a session's row."""

    status: str
    text: str
    released_chars: int
    decision_comment: str
    error: str

    @property
    def final(self) -> bool:
        return self.status in statuses.FINAL


ROW_FIELDS = ("status", "text", "released_chars", "decision_comment", "error")


def read_row(session_id: int) -> Row:
    values = ReviewSession.objects.values(*ROW_FIELDS).get(pk=session_id)
    return Row(**values)


def read_events(session_id: int, after: int) -> list[dict[str, Any]]:
    """The events after ``after``, without the attention rows token events carry for the
    page: a delivery never reads them, and over a long text they are most of the bytes."""
    rows = SessionEvent.objects.filter(session_id=session_id, seq__gt=after).order_by("seq")
    lean = rows.annotate(lean=RawSQL("payload - 'attention'", [], output_field=JSONField()))
    return [{"type": r.type, "seq": r.seq, **r.lean} for r in lean.only("type", "seq")[:5000]]


def read_progress(session_id: int, after: int) -> tuple[Row, list[dict[str, Any]]]:
    """The row, then the events after ``after``: those hold at least what led to the row's
    state. One trip off the event loop for both (its thread serves every call's reads)."""
    row = read_row(session_id)
    return row, read_events(session_id, after)


@dataclass
class Follower:
    session_id: int
    tokens: list[Token] = field(default_factory=list)
    last_seq: int = 0
    row: Row | None = None
    layer: BaseChannelLayer | None = None
    channel: str = ""
    finish_reason: str = ""  # the engine's, from the session's finish event
    # Characters locked for the application by the worker as it stored the tokens that
    # release them (the token event's ``released``): they may leave at once.
    locked: int = 0
    _receiving: asyncio.Task[Any] | None = None

    @property
    def text(self) -> str:
        """The text as the events have it now (the row's once the session waits or ended:
        a stop string cut at the end leaves no event)."""
        row = self.row
        if row is not None and row.status not in statuses.LIVE:
            return row.text
        return text_of(self.tokens)

    @property
    def status(self) -> str:
        return self.row.status if self.row is not None else statuses.DRAFT

    async def open(self) -> None:
        self.layer = get_channel_layer()
        try:
            if self.layer is not None:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(events.group_name(self.session_id), self.channel)
        except Exception as exc:  # Redis out of reach: reading the events still works
            log.warning("gateway: following session %s by polling (%s)", self.session_id, exc)
            self.layer = None
        await self.catch_up()

    async def close(self) -> None:
        if self._receiving is not None:
            await cancel_receive(self._receiving)  # ended before the call's loop moves on
            self._receiving = None
        if self.layer is not None and self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(events.group_name(self.session_id), self.channel)

    async def catch_up(self) -> None:
        """Read the stored events after the last one applied, and the row."""
        row, new = await off_loop(read_progress)(self.session_id, self.last_seq)
        for message in new:
            self._apply(message)
        self.row = row

    async def wait(self, timeout: float) -> None:
        """Until something happened to the session (then it is applied), or ``timeout``."""
        if self.layer is None:
            await asyncio.sleep(min(timeout, POLL_S))
            await self.catch_up()
            return
        if self._receiving is None:
            self._receiving = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait({self._receiving}, timeout=timeout)
        if not done:
            await self.catch_up()  # a quiet spell: make sure nothing was missed
            return
        task, self._receiving = self._receiving, None
        try:
            message = task.result()
        except Exception:
            await asyncio.sleep(POLL_S)
            await self.catch_up()
            return
        for event in message.get("events") or [message.get("event") or {}]:  # one, or a run
            await self._receive(event)

    async def _receive(self, event: dict[str, Any]) -> None:
        seq = int(event.get("seq") or 0)
        if seq <= self.last_seq:
            return
        if seq != self.last_seq + 1:
            await self.catch_up()
            return
        self._apply(event)
        if event.get("type") in (events.STATUS, events.FINISH, events.EDITED, events.TRUNCATED):
            await self.catch_up()  # the row, and the events of the same transaction after it

    def _apply(self, message: dict[str, Any]) -> None:
        if message["type"] == events.FINISH:
            self.finish_reason = str(message.get("reason") or "")
        if message["type"] == events.TOKEN and message.get("released"):
            self.locked = max(self.locked, int(message["released"]))
        apply(self.tokens, str(message["type"]), message)
        self.last_seq = int(message["seq"])
