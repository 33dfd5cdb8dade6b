"""API tokens (`Authorization: Token <key>`) and the CSRF check for cookie-authenticated calls.

Only a SHA-256 digest of each key is stored: a leaked database does not leak working keys,
so a key is shown once, when it is created or rotated.
"""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware

from reviewer.lifecycle import audit
from reviewer.models import ApiToken

SCHEME = "token"


class BadCredentials(Exception):
    pass


class AuthenticatedHttpRequest(HttpRequest):
    """A request that login_required (or the API's token check) let through."""

    user: User


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@transaction.atomic  # the new key and its audit record, or neither
def issue_token(user: User, actor: str | None = None) -> str:
    """Create or rotate the user's token and return the new key; the old key stops working.
    Audited as issued by ``actor`` (the user themselves unless said)."""
    key = secrets.token_urlsafe(32)
    ApiToken.objects.update_or_create(user=user, defaults={"key": digest(key)})
    payload = {"user": user.username}
    audit.append("api_token_issued", actor or user.username, payload=payload)
    return key


def token_user(request: HttpRequest) -> User | None:
    """The user named by the Authorization header; None without one, BadCredentials if wrong."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, key = header.strip().partition(" ")
    if scheme.lower() != SCHEME or not key.strip():
        raise BadCredentials("Authorization header must be 'Token <key>'")
    token = ApiToken.objects.select_related("user").filter(key=digest(key.strip())).first()
    if token is None or not token.user.is_active:
        raise BadCredentials("Invalid token")
    return token.user


def _no_view(request: HttpRequest) -> HttpResponseBase:  # a callback without csrf_exempt
    raise NotImplementedError  # the check reads its attributes; nothing calls it


def csrf_passes(request: HttpRequest) -> bool:
    """Django's own CSRF check, run on demand for the cookie-authenticated API calls."""
    check = CsrfViewMiddleware(_no_view)
    return check.process_view(request, _no_view, (), {}) is None
