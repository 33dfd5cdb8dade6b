"""The Pause ROI dashboard (staff only): figures over time, filters, CSV export."""

from __future__ import annotations

import csv
import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from reviewer.analytics import roi
from reviewer.analytics.floor import FloorFigures, floor_figures
from reviewer.analytics.task_card import task_card
from reviewer.models import Domain, ReviewSession

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
    end = _date(request.GET.get("end"), today, "end", errors)
    start = _date(
        request.GET.get("start"), end - dt.timedelta(days=DEFAULT_DAYS - 1), "start", errors
    )
    if start > end:
        errors.append("The period starts after it ends; showing the default period.")
        start, end = today - dt.timedelta(days=DEFAULT_DAYS - 1), today
    bucket = request.GET.get("bucket") or "day"
    if bucket not in roi.BUCKETS:
        errors.append(f"Unknown grouping {bucket!r}; grouping by day.")
        bucket = "day"
    domain = _found(
        Domain.objects.filter(slug=request.GET.get("domain") or None), "domain", request, errors
    )
    users = get_user_model().objects.filter(username=request.GET.get("reviewer") or None)
    reviewer = _found(users, "reviewer", request, errors)
    return Filters(domain, reviewer, start, end, bucket, tuple(errors))


def _date(raw: str | None, default: dt.date, name: str, errors: list[str]) -> dt.date:
    if not raw:
        return default
    try:
        return dt.date.fromisoformat(raw)
    except ValueError:
        errors.append(f"The {name} date {raw!r} is not a date (YYYY-MM-DD); using {default}.")
        return default


def _found(queryset: QuerySet[_M], name: str, request: HttpRequest, errors: list[str]) -> _M | None:
    wanted = request.GET.get(name)
    found = queryset.first()
    if wanted and found is None:
        errors.append(f"Unknown {name} {wanted!r}; showing all.")
    return found


# --- views -------------------------------------------------------------------------------------


@staff_only
def dashboard(request: HttpRequest) -> HttpResponse:
    filters = filters_from(request)
    rows = roi.session_rows(filters.sessions())
    settings = roi.settings_for(filters.domains_in_scope())
    totals = roi.figures(rows, settings)
    context = {
        "filters": filters,
        "domains": Domain.objects.all(),
        "reviewers": _reviewers(),
        "buckets": roi.BUCKETS,
        "has_data": bool(rows),
        "summary": summary_rows(totals),
        "shown": {row["key"]: row["value"] for row in summary_rows(totals)},
        "totals": totals,
        "settings": settings,
        "series": roi.time_series(rows, settings, filters.bucket, timezone.get_current_timezone()),
        "missing": missing_for_roi(totals, settings),
        "chart_names": chart_names(),
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
    owners = ReviewSession.objects.values_list("owner", flat=True).distinct()
    return get_user_model().objects.filter(pk__in=owners).order_by("username")


FIGURES = [
    ("sessions", "Sessions", "{:.0f}", "generations started in the period"),
    ("pauses_per_session", "Pauses per session", "{:.2f}", "all triggers"),
    ("manual_latency_ms_p50", "Manual pause latency p50", "{:.0f} ms", "request to halt"),
    ("manual_latency_ms_p95", "Manual pause latency p95", "{:.0f} ms", "request to halt"),
    ("decision_seconds_p50", "Time to decision p50", "{:.1f} s", "pause to first edit or resume"),
    ("edits_per_pause", "Edits per pause", "{:.2f}", "refused edits left out"),
    (
        "accepted_alternative_rate",
        "Accepted-alternative rate",
        "{:.0%}",
        "“choose” edits ÷ pauses that offered alternatives",
    ),
    (
        "interception_rate",
        "Interception rate",
        "{:.0%}",
        "policy pauses followed by an edit or rollback ÷ policy pauses",
    ),
    (
        "compression_ratio",
        "Decision-chain compression",
        "{:.2f}×",
        "generations replaced per reviewed one",
    ),
    ("hours_saved", "Reviewer hours saved", "{:.1f} h", "avoided cycles × minutes per cycle"),
    ("roi", "ROI", "{:.1%}", "value ÷ annual system cost"),
]


def summary_rows(totals: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": key, "label": label, "value": _shown(totals.get(key), fmt), "note": note}
        for key, label, fmt, note in FIGURES
    ]


def _shown(value: float | None, fmt: str) -> str:
    return "no data" if value is None else fmt.format(value)


def floor_rows(figures: list[FloorFigures]) -> list[dict[str, Any]]:
    """The review floor's figures as the dashboard shows them, one row per domain."""
    return [
        {
            "domain": f.domain,
            "generations": f.generations,
            "claim": _pair(f.claim_p(50), f.claim_p(95)),
            "decision": _pair(f.decision_p(50), f.decision_p(95)),
            "past_sla": f.past_sla,
            "approved_unpaused": _shown(f.approved_unpaused_share, "{:.0%}"),
            "edits": _shown(f.edits_per_reviewed, "{:.2f}"),
        }
        for f in figures
    ]


def _pair(p50: float | None, p95: float | None) -> str:
    if p50 is None or p95 is None:
        return _("no data")
    return f"{_seconds(p50)} / {_seconds(p95)}"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def missing_for_roi(totals: dict[str, Any], settings: dict[str, dict[str, Any]]) -> list[str]:
    """Why ROI is empty or small with the data at hand: each gap in words, so a thin period
    reads as "not measured yet" rather than as "worthless"."""
    gaps = []
    uncosted = [name for name, s in settings.items() if not s["annual_system_cost"]]
    if uncosted:
        gaps.append(
            _("No annual system cost is set for %(domains)s, so ROI cannot be computed there.")
            % {"domains": ", ".join(uncosted)}
        )
    defaults = [name for name, s in settings.items() if not s["set_by_admin"]]
    if defaults:
        gaps.append(
            _("The default assumptions (cycles, minutes, costs) are still in use for %(domains)s.")
            % {"domains": ", ".join(defaults)}
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


def chart_names() -> dict[str, str]:
    return {
        "edits": _("edits per pause"),
        "accepted": _("accepted alternatives"),
        "interception": _("interception"),
        "value": _("value"),
    }
