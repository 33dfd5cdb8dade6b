"""The queue page's websocket: one group per domain the reviewer reviews (every domain for
staff), and one of the reviewer's own sessions; it forwards the floor's ``queue`` messages (reviewer/events/queue.py) and takes no
commands — claims go through the command table, over HTTP or the session's socket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reviewer.events import queue
from reviewer.models import Domain
from reviewer.web.consumers import UNAUTHENTICATED

if TYPE_CHECKING:
    from channels.auth import UserLazyObject
    from django.contrib.auth.models import User


@database_sync_to_async
def reviewed_domains(user: UserLazyObject) -> list[int]:
    """The domains whose queue the user sees: those they review; staff see every domain."""
    person = cast("User", user)
    domains = Domain.objects.all() if person.is_staff else person.review_domains.all()
    return list(domains.values_list("pk", flat=True))


class QueueConsumer(AsyncJsonWebsocketConsumer):
    groups_joined: list[str]

    async def connect(self) -> None:
        self.groups_joined = []
        user = self.scope["user"]
        if user is None or not user.is_authenticated:
            await self.accept()  # before closing, so the browser sees the close code
            await self.close(code=UNAUTHENTICATED)
            return
        names = [queue.group_name(domain_id) for domain_id in await reviewed_domains(user)]
        for name in [*names, queue.owner_group_name(user.pk)]:
            await self.channel_layer.group_add(name, self.channel_name)
            self.groups_joined.append(name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for name in self.groups_joined:
            await self.channel_layer.group_discard(name, self.channel_name)

    async def queue_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        await self.send_json(
            {
                "type": "error",
                "message": "The queue socket takes no messages: claim over /api/ or the session",
                "status": 400,
            }
        )
