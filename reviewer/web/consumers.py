"""One websocket per review session: replays missed events, forwards the live ones its
session's feed hands it (reviewer/web/session_feed.py), takes commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import DatabaseError
from django.utils import translation

from reviewer import events, lifecycle
from reviewer.models import ReviewSession
from reviewer.web import arguments, bodies, command_table, session_feed, socket_pace, ui_text
from reviewer.web.socket_language import language_of
from reviewer.web.socket_user import current_user_async

if TYPE_CHECKING:
    from channels.auth import UserLazyObject
    from django.contrib.auth.models import User

UNAUTHENTICATED, NOT_FOUND = 4401, 4404
USER_CHECK_S = 10.0  # a socket that only receives reads its user again this often
log = logging.getLogger(__name__)


# The auth middleware's scope["user"] is a lazy stand-in for the logged-in User.


@database_sync_to_async
def can_see(user: UserLazyObject | User, session_id: int) -> bool:
    return ReviewSession.objects.visible_to(cast("User", user)).filter(pk=session_id).exists()


@database_sync_to_async
def events_page(session_id: int, after: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    return events.events_page(session_id, after, limit)


@database_sync_to_async
def run_command(
    user: UserLazyObject | User | None, session_id: int, name: object, message: dict[str, Any]
) -> dict[str, Any]:
    return command_table.run(cast("User", user), session_id, name, message)


def non_negative_int(value: str, default: int = 0) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return default


class SessionConsumer(AsyncJsonWebsocketConsumer):
    watching = False
    user_checked = 0.0  # when the user was last read again (live events re-read it too)
    shut = False  # closed for a login that is over: nothing more is sent
    replayed_to = 0  # highest seq sent from the database; live copies up to it are duplicates
    # Live events that came while a replay was being sent, in order; None when not replaying.
    held: list[tuple[dict[str, Any], str]] | None = None
    pace: socket_pace.Pace | None = None  # whether the reader keeps up (socket_pace.py)
    sent_to = 0  # highest seq sent, live or replayed
    lagging = False  # live events skipped since the reader fell behind: the store has them
    catch_up: asyncio.Task[None] | None = None  # sends them once the reader took the rest
    language = "en"  # the page's: a refused command says why in it

    async def connect(self) -> None:
        # Accept before closing so browsers see the close code, not a failed handshake.
        user = self.scope["user"]
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        authenticated = user is not None and user.is_authenticated
        if user is None or not authenticated or not await can_see(user, self.session_id):
            await self.accept()
            await self.close(code=UNAUTHENTICATED if not authenticated else NOT_FOUND)
            return
        self.user_checked = time.monotonic()
        self.language = language_of(self.scope)
        after = self.after_from_query()  # before watching: nothing after that may fail
        # Watch before reading the log so that nothing falls between the replay and live events.
        self.held = []
        await session_feed.watch(self.session_id, self)
        self.watching = True
        await self.accept()
        self.pace = socket_pace.attach(self.base_send)
        await self.replay(after)

    async def disconnect(self, code: int) -> None:
        if self.catch_up is not None:
            self.catch_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.catch_up
        if self.watching:
            self.watching = False
            await session_feed.unwatch(self.session_id, self)

    def after_from_query(self) -> int:
        # latin-1 reads any bytes: a query string that is not UTF-8 asks for no particular seq.
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        return non_negative_int(query.get("after", ["0"])[0])

    async def replay(self, after: int) -> None:
        """The stored events after ``after`` (up to REPLAY_LIMIT: the page asks for the rest),
        page by page, each read once the one before is sent, so that a long session's replay
        is never held whole; then the live ones that came meanwhile."""
        if self.held is None:
            self.held = []
        try:
            left, more = events.REPLAY_LIMIT, True
            while more and left > 0:
                page, more = await events_page(self.session_id, after, left)
                for event in page:
                    if self.pace is not None:
                        await self.pace.drained()  # a slow reader's replay waits for it
                    await self.send_json(self.in_language(event))
                    self.replayed_to = after = max(self.replayed_to, event["seq"])
                    self.sent_to = max(self.sent_to, after)
                left -= len(page)
        finally:
            while self.held:
                batch, self.held = self.held, []
                for event, text in batch:
                    await self.forward(event, text)
            self.held = None

    # ---- called by the session's feed (reviewer/web/session_feed.py) -----------------------
    async def deliver(self, event: dict[str, Any], text: str) -> None:
        if self.held is not None:
            self.held.append((event, text))
        else:
            await self.forward(event, text)

    async def forward(self, event: dict[str, Any], text: str) -> None:
        if self.shut or event.get("seq", 0) <= self.replayed_to or self.lagging:
            return  # sent already, or the catch-up sends it from the store
        if self.pace is not None and self.pace.behind:
            self.fall_behind()
            return
        if time.monotonic() - self.user_checked > USER_CHECK_S and not await self.still_allowed():
            return  # closed: the login is over, or the session out of the user's sight
        shown = self.in_language(event)
        await self.send(text_data=text if shown is event else json.dumps(shown))
        self.sent_to = max(self.sent_to, event.get("seq", 0))

    def in_language(self, event: dict[str, Any]) -> dict[str, Any]:
        """An engine error's message in the page's language (events are stored and sent in
        English, with the template and values to translate them); other events as they are."""
        if event.get("type") != events.ERROR or "template" not in event:
            return event
        with translation.override(self.language):
            return {**event, "message": ui_text.event_message(event)}

    def fall_behind(self) -> None:
        """The reader takes less than the session writes: live events stop here, and once
        what was sent has drained, the socket sends what it skipped from the store."""
        log.info(
            "Session %s: a socket fell behind after seq %s; it catches up from the store",
            self.session_id,
            self.sent_to,
        )
        self.lagging = True
        if self.catch_up is None:
            self.catch_up = asyncio.ensure_future(self.send_skipped())

    async def send_skipped(self) -> None:
        assert self.pace is not None, "only a paced socket falls behind"
        try:
            while self.lagging:  # again if it fell behind while catching up
                await self.pace.drained()
                self.lagging = False  # live events are held from here, as in any replay
                await self.replay(self.sent_to)
        except Exception:  # the store out of reach: the page's next sync asks again
            log.warning("Session %s: a socket's catch-up failed", self.session_id, exc_info=True)
        finally:
            self.catch_up = None

    async def lost_feed(self) -> None:
        self.watching = False
        await self.close(code=session_feed.LOST_LAYER)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Every malformed message gets an error frame; none closes the socket. Each is read,
        refused or carried out in the reviewer's language."""
        with translation.override(self.language):  # the command's thread inherits it
            if text_data is None:
                message = translation.gettext("Messages must be JSON text, not binary")
                await self.send_error(None, None, message, 400)
                return
            try:
                content = arguments.loads(text_data, what=translation.gettext("Message"))
            except lifecycle.CommandError as exc:
                await self.send_error(None, None, str(exc), exc.status)
                return
            await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            message = translation.gettext("Messages must be JSON objects")
            await self.send_error(None, None, message, 400)
        elif content.get("command") == "sync":
            await self.sync(content)
        else:
            await self.command(content)

    async def still_allowed(self) -> UserLazyObject | User | None:
        """The user now, where they may still see the session; else the socket closes. The
        database out of reach: the user as they were (the command then fails on its own)."""
        self.user_checked = time.monotonic()
        try:
            user = await current_user_async(dict(self.scope))
            visible = user is not None and await can_see(user, self.session_id)
        except DatabaseError:
            return cast("User", self.scope["user"])
        if not visible:
            self.shut = True
            await self.close(code=UNAUTHENTICATED if user is None else NOT_FOUND)
            return None
        return user

    async def sync(self, message: dict[str, Any]) -> None:
        if await self.still_allowed() is None:
            return
        after = message.get("after")
        try:
            after = arguments.AFTER(after) if after is not None else 0
        except lifecycle.CommandError as exc:
            await self.send_error("sync", echoed_id(message), str(exc), exc.status)
            return
        await self.replay(after)

    async def command(self, message: dict[str, Any]) -> None:
        name, command_id = message.get("command"), echoed_id(message)
        name = name if isinstance(name, str) and name in command_table.COMMANDS else None
        user = await self.still_allowed()
        if user is None:
            return
        try:
            result = await run_command(user, self.session_id, message.get("command"), message)
        except lifecycle.CommandError as exc:
            await self.send_error(name, command_id, str(exc), exc.status, exc.code)
            return
        except Exception:  # a bug must cost one command, not the reviewer's connection
            log.exception("Session %s: command %r failed", self.session_id, name)
            await self.send_error(name, command_id, "Internal error; see the server log", 500)
            return
        await self.send_json(
            {"type": "ack", "command": name, "command_id": command_id, "result": result}
        )

    async def send_error(
        self,
        name: str | None,
        command_id: str | None,
        message: str,
        status: int,
        code: str | None = None,
    ) -> None:
        error: dict[str, Any] = {"type": "error", "command": name, "command_id": command_id}
        error |= {"message": message, "status": status}
        if code is not None:  # what a client acts on; the message is for people
            error["code"] = code
        await self.send_json(error)


def echoed_id(message: dict[str, Any]) -> str | None:
    """The command id to echo in a reply: the client's own, when it is one we could take."""
    try:
        return bodies.command_id_of(message)
    except lifecycle.CommandError:
        return None
