"""Who calls: the application whose key the ``Authorization: Bearer`` header carries. A
missing, unknown, rotated or revoked key is refused alike (401), without saying which."""

from __future__ import annotations

from django.http import HttpRequest

from reviewer.gateway.database import off_loop
from reviewer.gateway.errors import GatewayError
from reviewer.lifecycle import application_keys
from reviewer.models import Application

MISSING = (
    "Missing API key: send it as 'Authorization: Bearer cae_...' (the key an administrator"
    " created for your application)"
)
REFUSED = "Invalid API key: it is unknown, was rotated or was revoked"


def bearer_key(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


async def application_of(request: HttpRequest) -> Application:
    key = bearer_key(request)
    if key is None:
        raise GatewayError(401, MISSING, code="missing_api_key")
    application = await off_loop(application_keys.application_for)(key)
    if application is None:
        raise GatewayError(401, REFUSED, code="invalid_api_key")
    return application
