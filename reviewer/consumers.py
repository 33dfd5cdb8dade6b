"""One websocket per review session: replays missed events, forwards live ones, takes commands."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reviewer import commands, events, services
from reviewer.models import ReviewSession

UNAUTHENTICATED, NOT_FOUND = 4401, 4404


@database_sync_to_async
def can_see(user, session_id: int) -> bool:
    return ReviewSession.objects.visible_to(user).filter(pk=session_id).exists()


@database_sync_to_async
def events_after(session_id: int, after: int) -> list[dict]:
    return events.events_after(session_id, after)


@database_sync_to_async
def run_command(user, session_id: int, name: str, message: dict) -> dict:
    return commands.run(user, session_id, name, message)


def non_negative_int(value, default: int = 0) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return default


class SessionConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    replayed_to = 0  # highest seq sent from the database; live copies up to it are duplicates

    async def connect(self) -> None:
        # Accept before closing so browsers see the close code, not a failed handshake.
        user = self.scope["user"]
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        if not user.is_authenticated or not await can_see(user, self.session_id):
            await self.accept()
            await self.close(code=UNAUTHENTICATED if not user.is_authenticated else NOT_FOUND)
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

    async def session_event(self, message: dict) -> None:
        event = message["event"]
        if event.get("seq", 0) > self.replayed_to:
            await self.send_json(event)

    @classmethod
    async def decode_json(cls, text_data: str):
        try:
            return json.loads(text_data)
        except ValueError:
            return None

    async def receive_json(self, content, **kwargs) -> None:
        if not isinstance(content, dict):
            await self.send_error(None, None, "Messages must be JSON objects", 400)
        elif content.get("command") == "sync":
            await self.replay(non_negative_int(content.get("after")))
        else:
            await self.command(content)

    async def command(self, message: dict) -> None:
        name, command_id = message.get("command"), message.get("command_id")
        try:
            result = await run_command(self.scope["user"], self.session_id, name, message)
        except services.CommandError as exc:
            await self.send_error(name, command_id, str(exc), exc.status)
            return
        await self.send_json(
            {"type": "ack", "command": name, "command_id": command_id, "result": result}
        )

    async def send_error(self, name, command_id, message: str, status: int) -> None:
        await self.send_json(
            {
                "type": "error",
                "command": name,
                "command_id": command_id,
                "message": message,
                "status": status,
            }
        )
