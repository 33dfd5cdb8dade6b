"""Who calls: the application whose key the ``Authorization: Bearer`` header carries. A
missing, unknown, rotated or revoked key is refused alike (401), without saying which; a
known one's request is counted against its limits (reviewer/gateway/limits.py)."""

from __future__ import annotations

from django.http import HttpRequest

from reviewer.gateway import limits
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


async def admitted(request: HttpRequest) -> Application:
    """The calling application, with this request counted against its limit: one trip off
    the event loop for both, before the call's own work."""
    key = bearer_key(request)
    if key is None:
        raise GatewayError(401, MISSING, code="missing_api_key")
    return await off_loop(_admit)(key)


def still_admitted(application: Application) -> bool:
    """Whether the key a call came with still works: a rotation or a revocation while the
    call waits for its review ends what it would receive."""
    current = Application.objects.active().filter(pk=application.pk)
    return current.filter(key_digest=application.key_digest).exists()


def refusal_now() -> GatewayError:
    return GatewayError(401, REFUSED, code="invalid_api_key")


def _admit(key: str) -> Application:
    application = application_keys.application_for(key)
    if application is None:
        raise GatewayError(401, REFUSED, code="invalid_api_key")
    limits.count_request(application)
    return application
