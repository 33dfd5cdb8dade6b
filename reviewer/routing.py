"""Websocket routes of the reviewer app."""

from __future__ import annotations

from django.urls import URLPattern, path

from reviewer.consumers import SessionConsumer

websocket_urlpatterns: list[URLPattern] = [
    # Channels' URLRouter takes Django's path() with an ASGI app, which Django's types do not.
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),  # type: ignore[arg-type]
]
