"""Application keys: created, rotated and revoked here, each change audited. A key is shown
once; only its SHA-256 digest is kept, so a leaked database leaks no working key. Keys start
with ``cae_`` so that they are told apart from reviewers' API tokens at a glance."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from reviewer.lifecycle import audit
from reviewer.models import Application, Domain

PREFIX = "cae_"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def create(
    name: str, domains: Iterable[Domain], actor: str, **limits: int
) -> tuple[Application, str]:
    """A new application bound to ``domains``, and its key (shown once)."""
    key = _new_key()
    with transaction.atomic():
        app = Application.objects.create(
            name=name, key_digest=digest(key), key_prefix=key[:12], **limits
        )
        app.domains.set(list(domains))
        audit.append(
            "application_created",
            actor,
            payload={"application": name, "domains": sorted(d.slug for d in app.domains.all())},
        )
    return app, key


def rotate(app: Application, actor: str) -> str:
    """A new key for ``app``; the old one stops working at once. Un-revokes a revoked app."""
    key = _new_key()
    with transaction.atomic():
        reactivated = app.revoked_at is not None
        app.key_digest, app.key_prefix = digest(key), key[:12]
        app.rotated_at, app.revoked_at = timezone.now(), None
        app.save(update_fields=["key_digest", "key_prefix", "rotated_at", "revoked_at"])
        payload = {"application": app.name, "reactivated": reactivated}
        audit.append("application_key_rotated", actor, payload=payload)
    return key


def revoke(app: Application, actor: str) -> None:
    """The key stops working; the application's generations stay (and stay reviewable)."""
    with transaction.atomic():
        app.revoked_at = timezone.now()
        app.save(update_fields=["revoked_at"])
        audit.append("application_revoked", actor, payload={"application": app.name})


def application_for(key: str) -> Application | None:
    """The active application whose key this is; None for an unknown, rotated or revoked key."""
    if not key.startswith(PREFIX):
        return None
    return Application.objects.active().filter(key_digest=digest(key)).first()


def settings_of(app: Application) -> dict[str, Any]:
    """What an admin may change about an application, as the audit chain records it."""
    return {
        "name": app.name,
        "domains": sorted(domain.slug for domain in app.domains.all()),
        "max_concurrent": app.max_concurrent,
        "requests_per_minute": app.requests_per_minute,
    }


def record_change(app: Application, before: dict[str, Any], actor: str) -> None:
    """Audits what changed since ``before`` (settings_of the stored application), if anything."""
    after = settings_of(app)
    changes = {key: [before[key], after[key]] for key in after if before.get(key) != after[key]}
    if changes:
        audit.append(
            "application_changed", actor, payload={"application": app.name, "changes": changes}
        )
