"""The review floor in figures, per domain: what waits now (for /metrics and the dashboard)
and how the floor answered gateway generations in a period (the dashboard).

Definitions, over the ownerless (gateway) sessions of a domain:

- waiting: paused, or generated and not yet decided; past SLA: waiting longer than the
  domain's ``review_sla_minutes`` (counted now, whatever the period);
- pause to claim: from a generation's first pause halting to the first claim (or
  reassignment) recorded after it, in the audit chain; generations no one claimed are left out;
- pause to decision: from the first pause halting to the approval or rejection;
- approved without a pause: approved generations that never paused ÷ gateway generations
  started in the period (an automatic approval included);
- edits per reviewed generation: edits made (refused ones left out) ÷ generations a reviewer
  claimed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import Prefetch
from django.utils import timezone

from reviewer.analytics.roi import percentile
from reviewer.models import AuditRecord, Domain, PauseEvent, ReviewSession, statuses

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.db.models import QuerySet

CLAIMS = ("claim", "reassign")
DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class Waiting:
    domain: str  # its slug
    waiting: int
    past_sla: int


def waiting_now(domains: Iterable[Domain] | None = None) -> list[Waiting]:
    """Per domain, the gateway generations waiting for a reviewer now, and those past SLA."""
    now = timezone.now()
    found = []
    for domain in domains if domains is not None else Domain.objects.all():
        waiting = ReviewSession.objects.filter(
            domain=domain, owner__isnull=True, status__in=statuses.WAITING
        )
        cutoff = now - dt.timedelta(minutes=domain.review_sla_minutes)
        past = waiting.filter(waiting_since__lte=cutoff).count()
        found.append(Waiting(domain.slug, waiting.count(), past))
    return found


@dataclass
class FloorFigures:
    """One domain's floor over a period."""

    domain: str
    generations: int = 0
    claim_seconds: list[float] = field(default_factory=list)
    decision_seconds: list[float] = field(default_factory=list)
    approved_unpaused: int = 0
    reviewed: int = 0
    reviewed_edits: int = 0
    past_sla: int = 0  # now

    def claim_p(self, q: float) -> float | None:
        return percentile(self.claim_seconds, q)

    def decision_p(self, q: float) -> float | None:
        return percentile(self.decision_seconds, q)

    @property
    def approved_unpaused_share(self) -> float | None:
        return self.approved_unpaused / self.generations if self.generations else None

    @property
    def edits_per_reviewed(self) -> float | None:
        return self.reviewed_edits / self.reviewed if self.reviewed else None


def floor_figures(sessions: QuerySet[ReviewSession], domains: list[Domain]) -> list[FloorFigures]:
    """The floor figures of each domain, over the gateway generations among ``sessions``."""
    figures = {d.pk: FloorFigures(d.display_name) for d in domains}
    for wait, domain in zip(waiting_now(domains), domains, strict=True):
        figures[domain.pk].past_sla = wait.past_sla
    records = AuditRecord.objects.filter(action__in=CLAIMS + DECISIONS).order_by("created_at")
    gateway = sessions.filter(owner__isnull=True, domain__in=domains).prefetch_related(
        Prefetch(
            "pauses",
            queryset=PauseEvent.objects.exclude(kind=PauseEvent.REOPENED).only(
                "session_id", "halted_at"
            ),
        ),
        Prefetch("audit", queryset=records.only("session_id", "action", "created_at")),
        "edits",
    )
    for session in gateway:
        add(figures[session.domain_id], session)
    return [figures[d.pk] for d in domains]


def add(figures: FloorFigures, session: ReviewSession) -> None:
    figures.generations += 1
    halts = [p.halted_at for p in session.pauses.all()]
    records = list(session.audit.all())
    if session.status == ReviewSession.COMPLETED and not halts:
        figures.approved_unpaused += 1
    if any(r.action in CLAIMS for r in records):
        figures.reviewed += 1
        figures.reviewed_edits += sum(1 for e in session.edits.all() if not e.error)
    if not halts:
        return
    first = min(halts)
    claimed = [r.created_at for r in records if r.action in CLAIMS and r.created_at >= first]
    decided = [r.created_at for r in records if r.action in DECISIONS and r.created_at >= first]
    if claimed:
        figures.claim_seconds.append((claimed[0] - first).total_seconds())
    if decided:
        figures.decision_seconds.append((decided[0] - first).total_seconds())
