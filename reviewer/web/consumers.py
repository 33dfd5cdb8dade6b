"""One websocket per review session: replays missed events, forwards live ones, takes commands."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reviewer import events, lifecycle
from reviewer.models import ReviewSession
from reviewer.web import arguments, command_table

if TYPE_CHECKING:
    from channels.auth import UserLazyObject
    from django.contrib.auth.models import User

UNAUTHENTICATED, NOT_FOUND = 4401, 4404
log = logging.getLogger(__name__)


# The auth middleware's scope["user"] is a lazy stand-in for the logged-in User.


@database_sync_to_async
def can_see(user: UserLazyObject, session_id: int) -> bool:
    return ReviewSession.objects.visible_to(cast("User", user)).filter(pk=session_id).exists()


@database_sync_to_async
def events_after(session_id: int, after: int) -> list[dict[str, Any]]:
    return events.events_after(session_id, after)


@database_sync_to_async
def run_command(
    user: UserLazyObject | None, session_id: int, name: object, message: dict[str, Any]
) -> dict[str, Any]:
    return command_table.run(cast("User", user), session_id, name, message)


# The channel layer hands one group message, the same object, to every socket of the group in
# this process: the event is encoded once for all of them (kept on the message), not per socket.
def shared_text(message: dict[str, Any]) -> str:
    text = message.get("event_text")
    if not isinstance(text, str):
        text = message["event_text"] = json.dumps(message["event"])
    return text


def shared_texts(message: dict[str, Any]) -> list[str]:
    texts = message.get("events_text")
    if not isinstance(texts, list):
        texts = message["events_text"] = [json.dumps(event) for event in message["events"]]
    return texts


def non_negative_int(value: str, default: int = 0) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return default


# Channels closes stale database connections before it dispatches any message, in a hop to the
# one thread that runs the process's sync code: for live events, a hop per socket per token,
# one after another (with 20 watchers, 12 % of daphne's event loop, and each watcher's event
# later than the one before). This consumer reaches the database only through
# database_sync_to_async, which closes them itself; its live events skip the hop.
LIVE_EVENTS = {"session.event": "session_event", "session.events": "session_events"}


class SessionConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    replayed_to = 0  # highest seq sent from the database; live copies up to it are duplicates

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = LIVE_EVENTS.get(message.get("type", ""))
        if handler is None:
            await super().dispatch(message)
        else:
            await getattr(self, handler)(message)

    async def connect(self) -> None:
        # Accept before closing so browsers see the close code, not a failed handshake.
        user = self.scope["user"]
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        authenticated = user is not None and user.is_authenticated
        if user is None or not authenticated or not await can_see(user, self.session_id):
            await self.accept()
            await self.close(code=UNAUTHENTICATED if not authenticated else NOT_FOUND)
            return
        # Join before reading the log so that nothing falls between the replay and live events.
        self.group = events.group_name(self.session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.replay(self.after_from_query())

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    def after_from_query(self) -> int:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        return non_negative_int(query.get("after", ["0"])[0])

    async def replay(self, after: int) -> None:
        for event in await events_after(self.session_id, after):
            await self.send_json(event)
            self.replayed_to = max(self.replayed_to, event["seq"])

    async def session_event(self, message: dict[str, Any]) -> None:
        if message["event"].get("seq", 0) > self.replayed_to:
            await self.send(text_data=shared_text(message))

    async def session_events(self, message: dict[str, Any]) -> None:
        """A run of events a relay stored at once, in order."""
        for event, text in zip(message["events"], shared_texts(message), strict=True):
            if event.get("seq", 0) > self.replayed_to:
                await self.send(text_data=text)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Every malformed message gets an error frame; none closes the socket."""
        if text_data is None:
            await self.send_error(None, None, "Messages must be JSON text, not binary", 400)
            return
        try:
            content = arguments.loads(text_data, what="Message")
        except lifecycle.CommandError as exc:
            await self.send_error(None, None, str(exc), exc.status)
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self.send_error(None, None, "Messages must be JSON objects", 400)
        elif content.get("command") == "sync":
            await self.sync(content)
        else:
            await self.command(content)

    async def sync(self, message: dict[str, Any]) -> None:
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
        try:
            result = await run_command(
                self.scope["user"], self.session_id, message.get("command"), message
            )
        except lifecycle.CommandError as exc:
            await self.send_error(name, command_id, str(exc), exc.status)
            return
        except Exception:  # a bug must cost one command, not the reviewer's connection
            log.exception("Session %s: command %r failed", self.session_id, name)
            await self.send_error(name, command_id, "Internal error; see the server log", 500)
            return
        await self.send_json(
            {"type": "ack", "command": name, "command_id": command_id, "result": result}
        )

    async def send_error(
        self, name: str | None, command_id: str | None, message: str, status: int
    ) -> None:
        await self.send_json(
            {
                "type": "error",
                "command": name,
                "command_id": command_id,
                "message": message,
                "status": status,
            }
        )


def echoed_id(message: dict[str, Any]) -> str | None:
    """The command id to echo in a reply: the client's own, when it is one we could take."""
    try:
        return command_table.command_id_of(message)
    except lifecycle.CommandError:
        return None
