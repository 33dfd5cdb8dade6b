"""The Pause ROI dashboard (staff only): figures over time, filters, CSV export."""

from __future__ import annotations

import csv
import datetime as dt
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django_stubs_ext import StrOrPromise

from reviewer.analytics import roi
from reviewer.analytics.floor import FloorFigures, floor_figures
from reviewer.analytics.task_card import task_card
from reviewer.models import Domain, PausePolicy, ReviewSession
from reviewer.web.arguments import storable

DEFAULT_DAYS = 30
_M = TypeVar("_M", bound=Model)


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous users go to the login page; logged-in reviewers who are not staff get 403."""

    @login_required
    @functools.wraps(view)
    def run(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("The dashboard is for staff")
        return view(request, *args, **kwargs)

    return run


@dataclass(frozen=True)
class Filters:
    domain: Domain | None
    reviewer: User | None
    start: dt.date
    end: dt.date  # inclusive
    bucket: str
    errors: tuple[str, ...] = ()

    def sessions(self) -> QuerySet[ReviewSession]:
        tz = timezone.get_current_timezone()
        start = dt.datetime.combine(self.start, dt.time.min, tzinfo=tz)
        end = dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time.min, tzinfo=tz)
        return roi.sessions_in(self.domain, self.reviewer, start, end)

    def domains_in_scope(self) -> list[Domain]:
        return [self.domain] if self.domain else list(Domain.objects.all())


def filters_from(request: HttpRequest) -> Filters:
    """Read the query string; a bad value is reported and replaced by its default."""
    errors: list[str] = []
    today = timezone.localdate()
    end = _date(request.GET.get("end"), today, BAD_END, errors)
    start = _date(
        request.GET.get("start"), end - dt.timedelta(days=DEFAULT_DAYS - 1), BAD_START, errors
    )
    if start > end:
        errors.append(_("The period starts after it ends; showing the default period."))
        start, end = today - dt.timedelta(days=DEFAULT_DAYS - 1), today
    bucket = request.GET.get("bucket") or "day"
    if bucket not in roi.BUCKETS:
        errors.append(_("Unknown grouping “%(value)s”; grouping by day.") % {"value": bucket})
        bucket = "day"
    domain = _found(
        Domain.objects.filter(slug=_wanted(request, "domain")), "domain", request, errors
    )
    users = get_user_model().objects.filter(username=_wanted(request, "reviewer"))
    reviewer = _found(users, "reviewer", request, errors)
    return Filters(domain, reviewer, start, end, bucket, tuple(errors))


# What a bad filter value reads as; %(value)s is what was given, %(default)s what is used.
BAD_START = gettext_lazy(
    "The start date “%(value)s” is not a date from 1900 to 9998 (YYYY-MM-DD); using %(default)s."
)
BAD_END = gettext_lazy(
    "The end date “%(value)s” is not a date from 1900 to 9998 (YYYY-MM-DD); using %(default)s."
)
UNKNOWN = {
    "domain": gettext_lazy("Unknown domain “%(value)s”; showing all domains."),
    "reviewer": gettext_lazy("Unknown reviewer “%(value)s”; showing all reviewers."),
}


# The dates a period may span: its default start (29 days before its end) and the day after
# its end must stay dates Python can hold.
EARLIEST, LATEST = dt.date(1900, 1, 1), dt.date(9998, 12, 31)


def _date(raw: str | None, default: dt.date, message: StrOrPromise, errors: list[str]) -> dt.date:
    if not raw:
        return default
    try:
        date = dt.date.fromisoformat(raw)
    except ValueError:
        date = None
    if date is None or not EARLIEST <= date <= LATEST:
        errors.append(str(message) % {"value": raw, "default": default.isoformat()})
        return default
    return date


def _wanted(request: HttpRequest, name: str) -> str | None:
    """The name a filter asks for; one the database cannot hold (a NUL) names nothing."""
    wanted = request.GET.get(name)
    return wanted if wanted and storable(wanted) else None


def _found(queryset: QuerySet[_M], name: str, request: HttpRequest, errors: list[str]) -> _M | None:
    wanted = request.GET.get(name)
    found = queryset.first()
    if wanted and found is None:
        errors.append(str(UNKNOWN[name]) % {"value": wanted})
    return found


# --- views -------------------------------------------------------------------------------------


@staff_only
def dashboard(request: HttpRequest) -> HttpResponse:
    filters = filters_from(request)
    rows = roi.session_rows(filters.sessions())
    settings = roi.settings_for(filters.domains_in_scope())
    totals = roi.figures(rows, settings)
    summary = summary_rows(totals)
    triggers = trigger_names(filters.domains_in_scope())
    context = {
        "filters": filters,
        "domains": Domain.objects.all(),
        "reviewers": _reviewers(),
        "buckets": [(bucket, BUCKET_NAMES[bucket]) for bucket in roi.BUCKETS],
        "has_data": bool(rows),
        "summary": summary,
        "shown": {row["key"]: row["value"] for row in summary},
        "totals": totals,
        "pauses_by_trigger": [
            _("%(trigger)s: %(count)s") % {"trigger": triggers.get(t, t), "count": n}
            for t, n in totals["pauses_by_trigger"].items()
        ],
        "currency": currency_of(settings),
        "settings": settings,
        "series": roi.time_series(rows, settings, filters.bucket, timezone.get_current_timezone()),
        "missing": missing_for_roi(totals, settings),
        "chart_names": chart_names(triggers, currency_of(settings)),
        "query": request.GET.urlencode(),
        "floor": floor_rows(floor_figures(filters.sessions(), filters.domains_in_scope())),
        "task_card": task_card(),
    }
    return render(request, "dashboard/roi.html", context)


@staff_only
def sessions_csv(request: HttpRequest) -> HttpResponse:
    filters = filters_from(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"pause-roi-{filters.start}-{filters.end}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(roi.SessionRow.CSV_FIELDS)
    for row in roi.session_rows(filters.sessions()):
        writer.writerow(row.csv_values())
    return response


# --- presentation ------------------------------------------------------------------------------


def _reviewers() -> QuerySet[User]:
    """Whom the reviewer filter can find (roi.sessions_in): owners, and the claimants of the
    sessions an application started."""
    owners = ReviewSession.objects.values("owner")
    claimants = ReviewSession.objects.filter(owner__isnull=True).values("claimed_by")
    found = Q(pk__in=owners) | Q(pk__in=claimants)
    return get_user_model().objects.filter(found).order_by("username")


BUCKET_NAMES = {
    "day": gettext_lazy("day"),
    "week": gettext_lazy("week"),
    "month": gettext_lazy("month"),
}


@dataclass(frozen=True)
class Figure:
    """A row of the Figures table: ``shown`` writes its value, unless it is a duration
    (``seconds``: how many seconds one unit of the stored value is), which is written in the
    unit the table's durations share."""

    key: str
    label: StrOrPromise
    note: StrOrPromise
    shown: Callable[[float], str] | None = None
    seconds: float = 0.0


def _count(value: float) -> str:
    return f"{value:.0f}"


def _two(value: float) -> str:
    return f"{value:.2f}"


def _percent(value: float) -> str:
    return f"{value:.0%}"


FIGURES = [
    Figure(
        "sessions",
        gettext_lazy("Sessions"),
        gettext_lazy("generations started in the period"),
        _count,
    ),
    Figure(
        "pauses_per_session", gettext_lazy("Pauses per session"), gettext_lazy("all triggers"), _two
    ),
    Figure(
        "manual_latency_ms_p50",
        gettext_lazy("Manual pause latency p50"),
        gettext_lazy("request to halt"),
        seconds=0.001,
    ),
    Figure(
        "manual_latency_ms_p95",
        gettext_lazy("Manual pause latency p95"),
        gettext_lazy("request to halt"),
        seconds=0.001,
    ),
    Figure(
        "decision_seconds_p50",
        gettext_lazy("Time to decision p50"),
        gettext_lazy("pause to first edit or resume"),
        seconds=1.0,
    ),
    Figure(
        "edits_per_pause",
        gettext_lazy("Edits per pause"),
        gettext_lazy("refused edits left out"),
        _two,
    ),
    Figure(
        "accepted_alternative_rate",
        gettext_lazy("Accepted-alternative rate"),
        gettext_lazy("pauses with a “choose” edit ÷ pauses that offered alternatives"),
        _percent,
    ),
    Figure(
        "interception_rate",
        gettext_lazy("Interception rate"),
        gettext_lazy("policy pauses followed by an edit or rollback ÷ policy pauses"),
        _percent,
    ),
    Figure(
        "compression_ratio",
        gettext_lazy("Decision-chain compression"),
        gettext_lazy("generations replaced per reviewed one"),
        lambda value: f"{value:.2f}×",
    ),
    Figure(
        "hours_saved",
        gettext_lazy("Reviewer hours saved"),
        gettext_lazy("avoided cycles × minutes per cycle"),
        lambda value: _("%(hours)s h") % {"hours": f"{value:.1f}"},
    ),
    Figure(
        "roi",
        gettext_lazy("ROI"),
        gettext_lazy("value ÷ annual system cost"),
        lambda value: f"{value:.1%}",
    ),
]


def summary_rows(totals: dict[str, Any]) -> list[dict[str, Any]]:
    """The Figures table; its durations (pause latency, time to decision) share one unit."""
    unit = duration_unit(
        totals[f.key] * f.seconds for f in FIGURES if f.seconds and totals.get(f.key) is not None
    )
    rows = []
    for figure in FIGURES:
        value = totals.get(figure.key)
        if value is None:
            shown = _("no data")
        elif figure.shown is None:
            shown = duration(value * figure.seconds, unit)
        else:
            shown = figure.shown(value)
        rows.append(
            {
                "key": figure.key,
                "label": str(figure.label),
                "value": shown,
                "note": str(figure.note),
            }
        )
    return rows


def _shown(value: float | None, fmt: str) -> str:
    return _("no data") if value is None else fmt.format(value)


def floor_rows(figures: list[FloorFigures]) -> list[dict[str, Any]]:
    """The review floor's figures as the dashboard shows them, one row per domain; its times
    share one unit."""
    times = [(f.claim_p(50), f.claim_p(95), f.decision_p(50), f.decision_p(95)) for f in figures]
    unit = duration_unit(t for four in times for t in four if t is not None)
    return [
        {
            "domain": f.domain,
            "generations": f.generations,
            "claim": _pair(f.claim_p(50), f.claim_p(95), unit),
            "decision": _pair(f.decision_p(50), f.decision_p(95), unit),
            "past_sla": f.past_sla,
            "approved_unpaused": _shown(f.approved_unpaused_share, "{:.0%}"),
            "edits": _shown(f.edits_per_reviewed, "{:.2f}"),
        }
        for f in figures
    ]


def _pair(p50: float | None, p95: float | None, unit: str) -> str:
    if p50 is None or p95 is None:
        return _("no data")
    return f"{duration(p50, unit)} / {duration(p95, unit)}"


def duration_unit(seconds: Iterable[float]) -> str:
    """The one unit of a table's durations: ms when all are under a second, minutes when one
    is two minutes or more, else seconds."""
    longest = max(seconds, default=1.0)
    if longest < 1:
        return "ms"
    return "min" if longest >= 120 else "s"


def duration(seconds: float, unit: str) -> str:
    """A duration in ``unit`` (duration_unit()), with its unit, in the page's language."""
    value = seconds * {"ms": 1000, "s": 1, "min": 1 / 60}[unit]
    number = f"{value:.0f}" if value >= 100 or value < 0.001 else f"{value:.3g}"
    if unit == "ms":
        return _("%(ms)s ms") % {"ms": number}
    if unit == "min":
        return _("%(minutes)s min") % {"minutes": number}
    return _("%(seconds)s s") % {"seconds": number}


def trigger_names(domains: Iterable[Domain]) -> dict[str, str]:
    """What a pause's trigger reads as: a reviewer's pause, or the policy by its shown name."""
    policies = PausePolicy.objects.filter(domain__in=list(domains))
    return {**{p.name: p.display_name for p in policies}, "manual": _("manual")}


def currency_of(settings: dict[str, dict[str, Any]]) -> str:
    """The currency the value and costs are in (the domains' currencies, should they differ)."""
    return " / ".join(sorted({s["currency"] for s in settings.values()}))


def missing_for_roi(totals: dict[str, Any], settings: dict[str, dict[str, Any]]) -> list[str]:
    """Why ROI is empty or small with the data at hand: each gap in words, so a thin period
    reads as "not measured yet" rather than as "worthless"."""
    gaps = []
    uncosted = [s["display_name"] for s in settings.values() if not s["annual_system_cost"]]
    if uncosted:
        gaps.append(
            _("No annual system cost is set for %(domains)s, so ROI cannot be computed there.")
            % {"domains": _(", ").join(uncosted)}
        )
    defaults = [s["display_name"] for s in settings.values() if not s["set_by_admin"]]
    if defaults:
        gaps.append(
            _("The default assumptions (cycles, minutes, costs) are still in use for %(domains)s.")
            % {"domains": _(", ").join(defaults)}
        )
    if not totals.get("reviewed_generations"):
        gaps.append(
            _(
                "No session in the period was edited at a pause and then resumed: no "
                "regenerate cycles were avoided yet."
            )
        )
    if not totals.get("interceptions"):
        gaps.append(_("No policy pause was followed by an edit or a rollback: no interceptions."))
    return gaps


def chart_names(triggers: dict[str, str], currency: str) -> dict[str, Any]:
    """What the charts call their series and axes (frontend/static/reviewer/roi.js)."""
    return {
        "edits": _("edits per pause"),
        "accepted": _("accepted alternatives"),
        "interception": _("interception"),
        "value": _("value"),
        "triggers": triggers,
        "pausesAxis": _("pauses per session"),
        "latencyAxis": _("latency (ms)"),
        "editsAxis": _("edits per pause"),
        "ratesAxis": _("share of pauses (%)"),
        "valueAxis": _("value (%(currency)s)") % {"currency": currency},
        "roiAxis": _("ROI (%)"),
    }
