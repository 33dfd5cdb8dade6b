"""Pause ROI: what pausing did and what it was worth, computed from the stored records.

Per session (one CSV row each) we count pauses, edits, decisions and interceptions; the
figures of a selection (a domain, a reviewer, a period, or one bucket of a time series)
are computed from those rows and the admin's ROI settings of each domain:

- pauses per session, by trigger ("manual" or the policy's name);
- manual pause latency p50 / p95 (ms, request to halt);
- decision time: from a pause halting to the reviewer's first edit or the resume, whichever
  came first (p50 and mean, seconds; open pauses are left out);
- edits per pause: edits made at pauses (refused ones left out) ÷ pauses; a reopened
  generation's pause, and its edits, are left out of every figure;
- accepted-alternative rate: pauses with a "choose" edit ÷ pauses that offered alternatives;
- interception rate: policy pauses followed by an edit or rollback ÷ policy pauses;
- decision-chain compression: a generation reviewed with pause → edit → continue replaces
  1 + B generations (generate → review → regenerate, B regenerate cycles being the
  domain's baseline); avoided cycles = reviewed generations × B;
- ROI = (hours saved × hourly cost + loss avoided per interception × interceptions)
  ÷ annual system cost, hours saved = avoided cycles × minutes saved per cycle ÷ 60; only
  the value of domains with an annual system cost counts (the value shown is every domain's).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Prefetch, Q, QuerySet

from reviewer.models import AuditRecord, Domain, Edit, PauseEvent, ReviewSession, RoiSettings

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_stubs_ext import WithAnnotations

    class RoiAudit(TypedDict):  # what session_rows() prefetches onto each session
        roi_audit: list[AuditRecord]


BUCKETS = ("day", "week", "month")


@dataclass
class SessionRow:
    """One session's share of every figure: what the CSV export holds."""

    session: int
    domain: str
    reviewer: str
    created_at: dt.datetime
    status: str
    task_type: str
    tokens: int = 0
    pauses: int = 0
    manual_pauses: int = 0
    policy_pauses: int = 0
    pauses_with_alternatives: int = 0
    edits: int = 0
    chosen_alternatives: int = 0
    reviewer_rollbacks: int = 0
    engine_rollbacks: int = 0
    interceptions: int = 0
    reviewed_with_pause_edit_continue: bool = False
    pauses_by_trigger: dict[str, int] = field(default_factory=dict)
    manual_latencies_ms: list[float] = field(default_factory=list)
    decision_seconds: list[float] = field(default_factory=list)

    CSV_FIELDS = (
        "session", "domain", "reviewer", "created_at", "status", "task_type", "tokens",
        "pauses", "manual_pauses", "policy_pauses", "pauses_with_alternatives", "edits",
        "chosen_alternatives", "reviewer_rollbacks", "engine_rollbacks", "interceptions",
        "reviewed_with_pause_edit_continue", "pauses_by_trigger", "manual_latency_ms_p50",
        "decision_seconds_p50",
    )  # fmt: skip

    def csv_values(self) -> list[Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["pauses_by_trigger"] = "; ".join(
            f"{k}={v}" for k, v in sorted(self.pauses_by_trigger.items())
        )
        data["manual_latency_ms_p50"] = _fmt(percentile(self.manual_latencies_ms, 50))
        data["decision_seconds_p50"] = _fmt(percentile(self.decision_seconds, 50))
        return [data[name] for name in self.CSV_FIELDS]


# --- selecting and reading sessions -----------------------------------------------------------


def sessions_in(
    domain: Domain | None = None,
    reviewer: User | None = None,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> QuerySet[ReviewSession]:
    """Sessions created in [start, end), of one domain and one reviewer when given."""
    sessions = ReviewSession.objects.select_related("domain", "owner", "claimed_by")
    if domain is not None:
        sessions = sessions.filter(domain=domain)
    if reviewer is not None:
        sessions = sessions.filter(Q(owner=reviewer) | Q(owner__isnull=True, claimed_by=reviewer))
    if start is not None:
        sessions = sessions.filter(created_at__gte=start)
    if end is not None:
        sessions = sessions.filter(created_at__lt=end)
    return sessions.order_by("created_at", "id")


def session_rows(sessions: QuerySet[ReviewSession]) -> list[SessionRow]:
    audits = AuditRecord.objects.filter(action__in=["resume", "rolled_back"]).only(
        "session_id", "action", "created_at"
    )
    pauses = PauseEvent.objects.exclude(kind=PauseEvent.REOPENED).defer("attention", "evidence")
    loaded = sessions.prefetch_related(
        Prefetch("pauses", queryset=pauses),
        "edits",
        Prefetch("audit", queryset=audits, to_attr="roi_audit"),
    )
    return [session_row(s) for s in loaded]


def session_row(session: WithAnnotations[ReviewSession, RoiAudit]) -> SessionRow:
    edits = [e for e in session.edits.all() if not e.error]
    pauses = list(session.pauses.all())  # reopen pauses left out (session_rows)
    counted = {p.pk for p in pauses}
    at_pauses = [e for e in edits if e.pause_id in counted]  # so edits ÷ pauses is like for like
    resumes = [a.created_at for a in session.roi_audit if a.action == "resume"]
    row = SessionRow(
        session=session.pk,
        domain=session.domain.name,
        reviewer=session.reviewer_name,
        created_at=session.created_at,
        status=session.status,
        task_type=session.task_type,
        tokens=len(session.generated_ids),
        edits=len(at_pauses),
        reviewer_rollbacks=sum(1 for e in edits if e.kind == "truncate"),
        engine_rollbacks=sum(1 for a in session.roi_audit if a.action == "rolled_back"),
    )
    for pause in pauses:
        add_pause(row, pause, [e for e in at_pauses if e.pause_id == pause.pk])
    applied = sorted(e.created_at for e in at_pauses if e.applied)
    row.reviewed_with_pause_edit_continue = bool(applied) and any(r > applied[0] for r in resumes)
    return row


def add_pause(row: SessionRow, pause: PauseEvent, edits: Sequence[Edit]) -> None:
    manual = pause.trigger == "manual"
    row.pauses += 1
    row.pauses_by_trigger[pause.trigger] = row.pauses_by_trigger.get(pause.trigger, 0) + 1
    # Once per pause, however often its reviewer chose; a choice means alternatives were
    # offered, though the pause keeps only the last list (maybe empty): the rate stays ≤ 100 %.
    chose = any(e.kind == "choose" for e in edits)
    row.chosen_alternatives += chose
    row.pauses_with_alternatives += bool(pause.alternatives) or chose
    if manual:
        row.manual_pauses += 1
        if pause.latency_ms is not None:
            row.manual_latencies_ms.append(pause.latency_ms)
    else:
        row.policy_pauses += 1
        row.interceptions += bool(edits)
    decided = [t for t in [pause.resumed_at, *(e.created_at for e in edits)] if t is not None]
    if decided:
        row.decision_seconds.append((min(decided) - pause.halted_at).total_seconds())


# --- figures ---------------------------------------------------------------------------------


def settings_for(domains: Iterable[Domain]) -> dict[str, dict[str, Any]]:
    """Each domain's ROI settings as shown beside the figures, by the domain's name (what
    a SessionRow holds); unsaved defaults where none. ``display_name``: the name as the page
    shows it (the admin's Chinese name on a Chinese page)."""
    found = {s.domain_id: s for s in RoiSettings.objects.filter(domain__in=list(domains))}
    shown = {}
    for domain in domains:
        settings = found.get(domain.pk) or RoiSettings(domain=domain)
        shown[domain.name] = {
            "baseline_regenerate_cycles": settings.baseline_regenerate_cycles,
            "minutes_saved_per_cycle": settings.minutes_saved_per_cycle,
            "reviewer_hourly_cost": float(settings.reviewer_hourly_cost),
            "loss_avoided_per_interception": float(settings.loss_avoided_per_interception),
            "annual_system_cost": float(settings.annual_system_cost),
            "currency": settings.currency,
            "set_by_admin": settings.pk is not None,
            "display_name": domain.display_name,
        }
    return shown


def figures(rows: Sequence[SessionRow], settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every figure of a selection. ``settings``: settings_for() of the domains in scope."""
    pauses = sum(r.pauses for r in rows)
    policy_pauses = sum(r.policy_pauses for r in rows)
    offered = sum(r.pauses_with_alternatives for r in rows)
    by_trigger: Counter[str] = Counter()
    for row in rows:
        by_trigger.update(row.pauses_by_trigger)
    latencies = [ms for r in rows for ms in r.manual_latencies_ms]
    decisions = [s for r in rows for s in r.decision_seconds]
    return {
        "sessions": len(rows),
        "tokens": sum(r.tokens for r in rows),
        "pauses": pauses,
        "pauses_per_session": _ratio(pauses, len(rows)),
        "pauses_per_session_by_trigger": {t: n / len(rows) for t, n in sorted(by_trigger.items())},
        "pauses_by_trigger": dict(sorted(by_trigger.items())),
        "manual_latency_ms_p50": percentile(latencies, 50),
        "manual_latency_ms_p95": percentile(latencies, 95),
        "decision_seconds_p50": percentile(decisions, 50),
        "decision_seconds_mean": _ratio(sum(decisions), len(decisions)),
        "edits_per_pause": _ratio(sum(r.edits for r in rows), pauses),
        "accepted_alternative_rate": _ratio(sum(r.chosen_alternatives for r in rows), offered),
        "interception_rate": _ratio(sum(r.interceptions for r in rows), policy_pauses),
        "interceptions": sum(r.interceptions for r in rows),
        "engine_rollbacks": sum(r.engine_rollbacks for r in rows),
        "reviewer_rollbacks": sum(r.reviewer_rollbacks for r in rows),
        **value(rows, settings),
    }


def value(rows: Sequence[SessionRow], settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Decision-chain compression and ROI, each domain's rows priced with its own settings."""
    reviewed = avoided = chain = hours = money = costed_money = 0.0
    for domain, assumed in settings.items():
        mine = [r for r in rows if r.domain == domain]
        n = sum(r.reviewed_with_pause_edit_continue for r in mine)
        cycles = n * assumed["baseline_regenerate_cycles"]
        saved_hours = cycles * assumed["minutes_saved_per_cycle"] / 60
        interceptions = sum(r.interceptions for r in mine)
        reviewed, avoided, chain = reviewed + n, avoided + cycles, chain + n + cycles
        hours += saved_hours
        worth = saved_hours * assumed["reviewer_hourly_cost"]
        worth += interceptions * assumed["loss_avoided_per_interception"]
        money += worth
        # A domain without a system cost has no ROI: its value would inflate the others'.
        costed_money += worth if assumed["annual_system_cost"] > 0 else 0
    cost = sum(s["annual_system_cost"] for s in settings.values())
    return {
        "reviewed_generations": int(reviewed),
        "avoided_regenerate_cycles": avoided,
        "compression_ratio": _ratio(chain, reviewed),
        "hours_saved": hours,
        "value": money,
        "costed_value": costed_money,
        "annual_system_cost": cost,
        "roi": _ratio(costed_money, cost),
    }


def time_series(
    rows: Sequence[SessionRow],
    settings: dict[str, dict[str, Any]],
    bucket: str,
    tz: dt.tzinfo = dt.UTC,
) -> list[dict[str, Any]]:
    """figures() per day, week (from Monday) or month, oldest first; empty buckets omitted."""
    groups: dict[dt.date, list[SessionRow]] = {}
    for row in rows:
        groups.setdefault(bucket_start(row.created_at.astimezone(tz).date(), bucket), []).append(
            row
        )
    return [{"period": day.isoformat(), **figures(groups[day], settings)} for day in sorted(groups)]


def bucket_start(day: dt.date, bucket: str) -> dt.date:
    if bucket == "week":
        return day - dt.timedelta(days=day.weekday())
    if bucket == "month":
        return day.replace(day=1)
    return day


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"
