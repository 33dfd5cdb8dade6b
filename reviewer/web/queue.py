"""The reviewer's queue across their domains: their own sessions and the ownerless (gateway)
sessions of the domains they review, each waiting item with how long it has waited, who holds
its claim and whether it is past the domain's review SLA. The page is rendered here; its live
part (reviewer/events/queue.py, frontend/static/reviewer/queue-page.js) reads one row at a time
from ``queue_item``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import JsonResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from reviewer import lifecycle
from reviewer.lifecycle import claims
from reviewer.models import ReviewSession, statuses
from reviewer.web.ui_text import status_labels

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import User
    from django.db.models import QuerySet

    from reviewer.web.auth import AuthenticatedHttpRequest


@dataclass(frozen=True)
class Row:
    """What the queue shows of one session, besides the session itself."""

    session: ReviewSession
    status_label: str
    on_floor: bool  # ownerless: it came from an application and waits in its domain's queue
    own: bool  # the viewer started it (staff also see others' sessions; those are not theirs)
    waiting: bool  # paused, or generated and not yet decided
    holder: str  # who holds the claim ('' for nobody)
    mine: bool  # the viewer holds the claim
    claimable: bool
    waited: str  # how long it has waited, in words ('' when it does not wait)
    waiting_since: datetime | None
    sla_at: datetime | None  # when a floor item passes the domain's review SLA
    past_sla: bool
    reviewers: list[str]  # staff reassign to one of these

    @property
    def needs_you(self) -> bool:
        """The viewer's own waiting sessions, and the floor's they hold; a floor item nobody
        holds offers its claim instead (staff see others' sessions too: not theirs)."""
        return self.waiting and (self.own or self.mine)


def waited_text(seconds: float) -> str:
    """How long an item has waited, as the page's script writes it too (queue.js)."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return _("under a minute")
    if minutes < 60:
        return _("%(minutes)s min") % {"minutes": minutes}
    return _("%(hours)s h %(minutes)s min") % {"hours": minutes // 60, "minutes": minutes % 60}


def row_for(session: ReviewSession, user: User, now: datetime) -> Row:
    on_floor = session.owner_id is None
    waiting = session.status in statuses.WAITING
    held = claims.holder(session, now)
    since = session.waiting_since if waiting else None
    sla_at = since + timedelta(minutes=session.domain.review_sla_minutes) if since else None
    floor_sla = sla_at if on_floor else None
    reviewers = []
    if on_floor and user.is_staff and not session.is_final:
        reviewers = sorted(r.username for r in session.domain.reviewers.all() if r.is_active)
    return Row(
        session=session,
        status_label=status_labels().get(session.status, session.status),
        on_floor=on_floor,
        own=session.owner_id == user.pk,
        waiting=waiting,
        holder=held.username if held else "",
        mine=held is not None and held.pk == user.pk,
        claimable=on_floor and waiting and held is None,
        waited=waited_text((now - since).total_seconds()) if since else "",
        waiting_since=since,
        sla_at=floor_sla,
        past_sla=floor_sla is not None and floor_sla <= now,
        reviewers=reviewers,
    )


def rows_for(sessions: Iterable[ReviewSession], user: User) -> list[Row]:
    now = timezone.now()
    return [row_for(session, user, now) for session in sessions]


def waiting_count(user: User) -> int:
    """What the tab's title counts: the items waiting for the viewer, their own and those of
    the floor nobody else holds."""
    now = timezone.now()
    held_by_other = (
        Q(owner__isnull=True, claimed_by__isnull=False, claim_expires_at__gt=now)
        & ~Q(claimed_by=user)
        & ~claims.lapsed_claims(now)  # a holder who may no longer act holds nothing
    )
    visible = ReviewSession.objects.visible_to(user)
    if user.is_staff:  # staff see every session; their queue is their domains' floor and their own
        visible = visible.filter(Q(owner=user) | Q(owner__isnull=True))
    return visible.filter(status__in=statuses.WAITING).exclude(held_by_other).count()


def sweep_lapsed_claims() -> None:
    """The queue is where a lapsed claim matters: drop it (audited, told to the other pages)
    before showing claims. The worker's heartbeat sweeps too, for when nobody looks."""
    claims.expire_lapsed()


def loaded(sessions: QuerySet[ReviewSession]) -> QuerySet[ReviewSession]:
    return sessions.select_related("domain", "owner", "application", "claimed_by").prefetch_related(
        "domain__reviewers"
    )


@login_required
@require_GET
def queue_item(request: AuthenticatedHttpRequest, session_id: int) -> JsonResponse:
    """One row of the queue as the page shows it, and the viewer's waiting count: what the
    page's script reads when the floor tells it an item changed."""
    try:
        found = lifecycle.get_session_for(request.user, session_id)
    except lifecycle.NotFound:
        return JsonResponse({"error": _("Session not found")}, status=404)
    one = ReviewSession.objects.filter(pk=found.pk).annotate(pause_count=Count("pauses"))
    session = loaded(one).get()
    row = row_for(session, request.user, timezone.now())
    html = render_to_string(
        "reviewer/queue_row.html", {"row": row, "user": request.user}, request=request
    )
    return JsonResponse(
        {
            "id": session.pk,
            "status": session.status,
            "domain": session.domain.display_name,
            "waiting": row.waiting,
            "claimable": row.claimable,
            "claimed_by": row.holder or None,
            "past_sla": row.past_sla,
            "waiting_count": waiting_count(request.user),
            "row": html,
        }
    )


def page_labels() -> dict[str, Any]:
    """The queue page script's words."""
    return {
        "under": _("under a minute"),
        "minutes": _("%(minutes)s min"),
        "hours": _("%(hours)s h %(minutes)s min"),
        "title": _("Queue"),
        "newPause": _("A pause waits in %(domain)s: session %(id)s"),
        "claimedBy": _("Session %(id)s is claimed by %(reviewer)s"),
        "claimed": _("You claimed session %(id)s"),
        "released": _("You released session %(id)s"),
        "notifyOn": _("Notifications are on"),
        "notifyDenied": _("The browser blocks notifications for this site"),
        "live": _("Live"),
        "reconnecting": _("Connection lost, reconnecting…"),
        "closed": _("Disconnected"),
        "loggedOut": _("Your login has ended: reload the page to log in again"),
        "unreachable": _("The server could not be reached; try again"),
        "refused": _("The server refused the request (HTTP %(status)s)"),
        "nothingToClaim": _("Nothing here waits to be claimed."),
    }
