"""The queue page's websocket: one group per domain the reviewer reviews (every domain for
staff), and one of the reviewer's own sessions; it forwards the floor's ``queue`` messages
(reviewer/events/queue.py) and takes no commands — claims go through the command table, over
HTTP or the session's socket. Before it forwards a message it reads its user again (at most
every ``USER_CHECK_S``): a reviewer who logged out or was deactivated is closed out, and one
who left a domain hears no more of it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import DatabaseError

from reviewer.events import queue
from reviewer.models import Domain
from reviewer.web.consumers import UNAUTHENTICATED, USER_CHECK_S
from reviewer.web.socket_user import current_user_async

if TYPE_CHECKING:
    from channels.auth import UserLazyObject
    from django.contrib.auth.models import User


@database_sync_to_async
def reviewed_domains(user: UserLazyObject | User) -> list[int]:
    """The domains whose queue the user sees: those they review; staff see every domain."""
    person = cast("User", user)
    domains = Domain.objects.all() if person.is_staff else person.review_domains.all()
    return list(domains.values_list("pk", flat=True))


class QueueConsumer(AsyncJsonWebsocketConsumer):
    groups_joined: list[str]
    domains: set[int]  # the domains the user reviewed when last read
    user_checked: float = 0.0
    shut: bool = False

    async def connect(self) -> None:
        self.groups_joined, self.domains = [], set()
        user = self.scope["user"]
        if user is None or not user.is_authenticated:
            await self.accept()  # before closing, so the browser sees the close code
            await self.close(code=UNAUTHENTICATED)
            return
        self.domains = set(await reviewed_domains(user))
        self.user_checked = time.monotonic()
        names = [queue.group_name(domain_id) for domain_id in self.domains]
        for name in [*names, queue.owner_group_name(user.pk)]:
            await self.channel_layer.group_add(name, self.channel_name)
            self.groups_joined.append(name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for name in self.groups_joined:
            await self.channel_layer.group_discard(name, self.channel_name)

    async def queue_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        if time.monotonic() - self.user_checked > USER_CHECK_S and not await self.still_allowed():
            return  # closed: the login is over
        if self.shut or not self.concerns(event):
            return
        await self.send_json(event)

    def concerns(self, event: dict[str, Any]) -> bool:
        """A message of a domain the user reviews (as last read), or of their own session."""
        user = cast("User", self.scope["user"])  # connected: a user who was logged in
        return event.get("domain") in self.domains or event.get("owner") == user.pk

    async def still_allowed(self) -> bool:
        """Whether the login still holds; the domains it reviews are read again with it. The
        database out of reach: as it was."""
        self.user_checked = time.monotonic()
        try:
            user = await current_user_async(dict(self.scope))
            if user is not None:
                self.domains = set(await reviewed_domains(user))
        except DatabaseError:
            return True
        if user is None:
            self.shut = True
            await self.close(code=UNAUTHENTICATED)
            return False
        return True

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
