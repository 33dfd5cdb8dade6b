"""Claims: a gateway session has no owner, so one reviewer of its domain claims it and holds it
until they decide, release it, or the claim lapses without activity. Every claim, release,
expiry and reassignment is audited and sent to the session's and the domain's watchers.

A claim lasts only while its holder may act on the session: an active user who reviews its
domain, or staff (who see every session). A holder deactivated, deleted or taken off the
domain holds nothing from that moment (``holder``), and the sweep drops the claim with a
``claim_expired`` record whose ``cause`` says why (``CAUSES``)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from reviewer import events
from reviewer.events import queue
from reviewer.lifecycle import audit
from reviewer.lifecycle.idempotency import idempotent
from reviewer.lifecycle.transitions import (
    Conflict,
    NotFound,
    S,
    get_session_for,
    locked,
    named,
    status_named,
)
from reviewer.models import AuditRecord, Domain, ReviewSession, statuses
from reviewer.web import arguments
from reviewer.web.arguments import InvalidInput

if TYPE_CHECKING:
    from datetime import datetime

# A reviewer claims what waits for them: a pause, or a generated text awaiting a decision.
CLAIMABLE = statuses.WAITING

# Why a claim ended without its holder's release: the ``cause`` of a ``claim_expired`` record.
LAPSED = "lapsed"  # claim_minutes went by without the holder's activity
ENDED = "ended"  # the session ended (failed) with the claim; a reviewer now retries it
INACTIVE = "inactive"  # the holder's account was deactivated
DELETED = "deleted"  # the holder's account was deleted
NOT_A_REVIEWER = "not_a_reviewer"  # the holder, not staff, no longer reviews the domain
CAUSES = (LAPSED, ENDED, INACTIVE, DELETED, NOT_A_REVIEWER)
# The records that name who took a claim: a deleted holder's name is read back from them.
TAKEN = ("claim", "renew", "reassign")


def holder(session: ReviewSession, now: datetime | None = None) -> User | None:
    """Who holds the session's claim now: None when nobody does, when it has lapsed, and when
    its holder may no longer act on the session (``may_act``)."""
    if session.claimed_by_id is None or session.claim_expires_at is None:
        return None
    if session.claim_expires_at <= (now or timezone.now()):
        return None
    user = session.claimed_by
    if user is None or not may_act(user, session):
        return None
    return user


def may_act(user: User, session: ReviewSession) -> bool:
    """An active user who reviews the session's domain, or active staff (who see and may
    claim every session): whom a claim on the session may belong to."""
    if not user.is_active:
        return False
    return user.is_staff or reviews(user, session.domain)


def reviews(user: User, domain: Domain) -> bool:
    """Whether ``user`` is one of the domain's reviewers (the prefetched list where there is
    one: the queue's rows load it with their domains)."""
    cached = getattr(domain, "_prefetched_objects_cache", {}).get("reviewers")
    if cached is not None:
        return any(reviewer.pk == user.pk for reviewer in cached)
    return domain.reviewers.filter(pk=user.pk).exists()


def lapse_cause(session: ReviewSession, now: datetime | None = None) -> str | None:
    """Why the session's claim no longer counts (one of CAUSES); None while it does, or when
    there is none to drop: an ended session keeps ``claimed_by`` as its reviewer of record."""
    if session.claimed_by_id is None:
        return DELETED if session.claim_expires_at is not None else None
    if session.claim_expires_at is None:
        return ENDED
    if session.claim_expires_at <= (now or timezone.now()):
        return LAPSED
    user = session.claimed_by
    if user is None:  # deleted since the session was read
        return DELETED
    if not user.is_active:
        return INACTIVE
    if not may_act(user, session):
        return NOT_A_REVIEWER
    return None


def claim_info(session: ReviewSession) -> dict[str, Any]:
    """The claim as the API and the page show it."""
    held = holder(session)
    expires = session.claim_expires_at.isoformat() if held and session.claim_expires_at else None
    return {"claimed_by": held.username if held else None, "claim_expires_at": expires}


@idempotent("claim")
def claim(user: User, session_id: Any) -> dict[str, Any]:
    """Take a waiting gateway session; exactly one of two reviewers claiming at once wins (the
    row is locked), the other is told who has it."""
    with transaction.atomic():
        session = _locked_gateway_session(user, session_id, "claim")
        if session.status not in CLAIMABLE:
            raise Conflict(
                _("Only a paused or generated session can be claimed, not a %(status)s one")
                % {"status": status_named(session.status)}
            )
        _take(session, user)
    return _answer(session)


@idempotent("release")
def release(user: User, session_id: Any) -> dict[str, Any]:
    """Give a claim back: the session waits in the domain's queue again."""
    with transaction.atomic():
        session = _locked_gateway_session(user, session_id, "release")
        if holder(session) != user:
            raise Conflict(_("You do not hold a claim on session %(id)s") % {"id": session.pk})
        _drop(session, user.username, "release")
    return _answer(session)


@idempotent("reassign")
def reassign(user: User, session_id: Any, reviewer: Any) -> dict[str, Any]:
    """Staff hand a gateway session to another reviewer of its domain. A session the user may
    not see is not found, as for every command, before they are told they are not staff."""
    name = arguments.REVIEWER(reviewer)
    with transaction.atomic():
        session = _locked_gateway_session(user, session_id, "reassign")
        if not user.is_staff:
            raise Conflict(_("Only staff can reassign a session"))
        if session.is_final:
            raise Conflict(
                _("Cannot %(command)s a session that is %(status)s")
                % {"command": named("reassign"), "status": status_named(session.status)}
            )
        target = session.domain.reviewers.filter(username=name, is_active=True).first()
        if target is None:
            raise InvalidInput(
                _("“%(name)s” is not a reviewer of %(domain)s")
                % {"name": name, "domain": session.domain.display_name}
            )
        _expire_if_lapsed(session)  # on the record before the new holder, as a claim does
        previous = holder(session)
        _hold(session, target, "reassign", actor=user.username, previous=previous)
    return _answer(session)


def take_to_retry(session: ReviewSession, user: User) -> None:
    """A failed gateway session can be claimed by nobody (its claim ended with it): the
    reviewer who resumes it takes the claim (the caller holds the row lock)."""
    _take(session, user)


def renew(session: ReviewSession, user: User) -> None:
    """A command of the claim's holder keeps the claim alive (the caller holds the row lock)."""
    if session.owner_id is None and holder(session) == user:
        session.claim_expires_at = _expiry(session)
        session.save(update_fields=["claim_expires_at"])


def require_claim(session: ReviewSession, user: User, command: str) -> None:
    """A gateway session is driven only by the reviewer holding its claim."""
    if session.owner_id is not None:
        return
    current = holder(session)
    if current == user:
        return
    if current is None:
        raise Conflict(
            _("To %(command)s session %(id)s, claim it first")
            % {"id": session.pk, "command": named(command)}
        )
    raise claimed_by_another(session, current)


def claimed_by_another(session: ReviewSession, current: User) -> Conflict:
    return Conflict(
        _("Session %(id)s is claimed by %(reviewer)s")
        % {"id": session.pk, "reviewer": current.username}
    )


def expire_lapsed() -> int:
    """Audit and drop every claim that lapsed, and every claim whose holder may no longer act
    on the session (deactivated, deleted, taken off the domain); returns how many. Called
    where claims are read (the queue, a claim) and by the worker's heartbeat: such a claim is
    never honoured in between either (``holder``)."""
    lapsed = S.objects.filter(lapsed_claims(timezone.now()))
    count = 0
    for session_id in lapsed.values_list("pk", flat=True):
        with transaction.atomic():
            session = locked(session_id)
            count += _expire_if_lapsed(session)
    return count


def lapsed_claims(now: datetime) -> Q:
    """The sessions whose claim ``lapse_cause`` would drop, in one query (an ended session's
    reviewer of record is no claim: it has no expiry)."""
    reviews_domain = Domain.reviewers.through.objects.filter(
        domain_id=OuterRef("domain_id"), user_id=OuterRef("claimed_by_id")
    )
    gone = Q(claimed_by__isnull=True) | Q(claim_expires_at__lte=now)
    barred = Q(claimed_by__is_active=False) | Q(
        Q(claimed_by__is_staff=False), ~Exists(reviews_domain)
    )
    return Q(Q(claim_expires_at__isnull=False), gone | barred)


# --- helpers ---------------------------------------------------------------------------------


def _locked_gateway_session(user: User, session_id: Any, command: str) -> ReviewSession:
    session = locked(get_session_for(user, session_id).pk)
    if session.owner_id is not None:
        raise NotFound(
            _("Session %(id)s has an owner: there is nothing to %(command)s")
            % {"id": session.pk, "command": named(command)}
        )
    return session


def _take(session: ReviewSession, user: User) -> None:
    """Claim the locked session for ``user`` (renew their own claim), unless another holds it."""
    _expire_if_lapsed(session)
    current = holder(session)
    if current is not None and current != user:
        raise claimed_by_another(session, current)
    _hold(session, user, "claim" if current is None else "renew")


def _expiry(session: ReviewSession) -> datetime:
    return timezone.now() + timedelta(minutes=session.domain.claim_minutes)


def _hold(
    session: ReviewSession,
    user: User,
    action: str,
    actor: str | None = None,
    previous: User | None = None,
) -> None:
    session.claimed_by, session.claim_expires_at = user, _expiry(session)
    session.save(update_fields=["claimed_by", "claim_expires_at", "updated_at"])
    payload = {"reviewer": user.username, "expires_at": session.claim_expires_at.isoformat()}
    if previous is not None:
        payload["previous"] = previous.username
    audit.append(action, actor or user.username, session, payload)
    _tell(session, action)


def _drop(
    session: ReviewSession, actor: str, action: str, extra: dict[str, Any] | None = None
) -> None:
    previous = session.claimed_by.username if session.claimed_by else None
    if previous is None and extra:  # a deleted holder: named by the record of their claim
        previous = _last_holder_name(session)
    session.claimed_by, session.claim_expires_at = None, None
    session.save(update_fields=["claimed_by", "claim_expires_at", "updated_at"])
    audit.append(action, actor, session, {"reviewer": previous, **(extra or {})})
    _tell(session, action)


def _expire_if_lapsed(session: ReviewSession) -> int:
    """Drop the locked session's claim if it no longer counts, audited as ``claim_expired``
    with its cause; 1 if it did."""
    cause = lapse_cause(session)
    if cause is None:
        return 0
    _drop(session, "system", "claim_expired", {"cause": cause})
    return 1


def _last_holder_name(session: ReviewSession) -> str | None:
    taken = AuditRecord.objects.filter(session=session, action__in=TAKEN).order_by("-id")
    payload = taken.values_list("payload", flat=True).first()
    name = payload.get("reviewer") if isinstance(payload, dict) else None
    return name if isinstance(name, str) else None


def _tell(session: ReviewSession, action: str) -> None:
    info = claim_info(session)
    events.emit(
        session.pk, events.CLAIM, events.claim(info["claimed_by"], info["claim_expires_at"], action)
    )
    queue.announce(session, action)


def _answer(session: ReviewSession) -> dict[str, Any]:
    return {"id": session.pk, "status": session.status, **claim_info(session)}
