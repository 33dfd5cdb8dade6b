"""Websocket routes of the reviewer app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import path

from reviewer.web.consumers import SessionConsumer
from reviewer.web.queue_consumer import QueueConsumer

if TYPE_CHECKING:
    from channels.routing import URLRouter, _ExtendedURLPattern

websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    # Channels' URLRouter takes Django's path() with an ASGI app; Django's types do not.
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),  # type: ignore[arg-type, list-item]
    path("ws/queue/", QueueConsumer.as_asgi()),  # type: ignore[arg-type, list-item]
]
