"""Websocket routes of the reviewer app."""

websocket_urlpatterns: list = []
