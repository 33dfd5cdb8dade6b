"""A review floor for tests: alice and bob review clinical notes, carol reviews contracts, and
an application's generations wait in the clinical queue without an owner."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from reviewer.models import Application, Domain, ReviewSession
from tests.session_factory import clinical_notes, make_session


def contracts() -> Domain:
    domain, _ = Domain.objects.get_or_create(
        name="Contracts",
        defaults={"slug": "contracts", "specialty": "legal", "system_prompt": "Review."},
    )
    return domain


def note_drafter() -> Application:
    app, _ = Application.objects.get_or_create(
        name="Note drafter", defaults={"key_digest": "0" * 64, "key_prefix": "cae_test"}
    )
    return app


def make_floor(alice: User, bob: User, carol: User) -> None:
    clinical_notes().reviewers.add(alice, bob)
    contracts().reviewers.add(carol)


def gateway_session(
    status: str = ReviewSession.PAUSED, waited_min: float = 1, **fields
) -> ReviewSession:
    """A generation from the note drafter, waiting (when paused or generated) for this long."""
    waiting = status in (ReviewSession.PAUSED, ReviewSession.GENERATED)
    since = timezone.now() - timedelta(minutes=waited_min) if waiting else None
    return make_session(None, status, application=note_drafter(), waiting_since=since, **fields)
