"""Who a websocket acts for, read again at each command: Channels reads the user once, at the
handshake, and a socket may stay open for hours. A reviewer who logged out, changed their
password, was deactivated or lost staff rights since must not act through an old socket."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, get_user_model
from django.contrib.auth.models import User


def current_user(scope: dict[str, Any]) -> User | None:
    """The socket's user as the database has it now, or None where the login is over."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    if fresh is None:
        return None
    key = getattr(scope.get("session"), "session_key", None)
    if key:  # a login by cookie: read its session anew (a logout deletes it)
        stored = import_module(settings.SESSION_ENGINE).SessionStore(key)
        if stored.get(HASH_SESSION_KEY) != fresh.get_session_auth_hash():
            return None
    return fresh


current_user_async = database_sync_to_async(current_user)
