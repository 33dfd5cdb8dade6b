"""Websocket routes of the reviewer app."""

from __future__ import annotations

from django.urls import path

from reviewer.web.consumers import SessionConsumer

websocket_urlpatterns: list = [
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
]
