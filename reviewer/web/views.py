"""Pages of the reviewer UI. Thin: look up, call services, render. The live part of the
session page runs in the browser over the session's websocket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.db.models import Case, Count, QuerySet, When
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET

from inference.backend import LIVE_ATTENTION
from reviewer import lifecycle
from reviewer.analytics.metrics import scrape_allowed
from reviewer.analytics.timeline import last_decision, policy_names, stop_reason, timeline
from reviewer.lifecycle import claims
from reviewer.lifecycle.task_corrections import CORRECTABLE, correction_data, correction_of
from reviewer.models import AuditRecord, Domain, GlossaryTerm, ReviewSession, statuses
from reviewer.web import queue
from reviewer.web.auth import AuthenticatedHttpRequest
from reviewer.web.features import backend_features
from reviewer.web.health import check_database, check_redis, check_worker, engine_loading
from reviewer.web.ui_text import (
    command_labels,
    decided_text,
    js_labels,
    reason_templates,
    session_error,
    status_labels,
)


def healthz(request: HttpRequest) -> JsonResponse:
    """Up or down, and which part, for anyone (a load balancer's probe); the details (worker
    names, the first line of an error, which names hosts and users) for staff, or for the
    metrics token's bearer where one is set."""
    checks = [check_database(), check_redis(), check_worker()]
    healthy = all(check.ok for check in checks)
    detailed = bool(settings.CAESURA_METRICS_TOKEN) and scrape_allowed(request)
    if not detailed and checks[0].ok:  # who asks is read from Postgres: only while it answers
        detailed = request.user.is_authenticated and request.user.is_staff
    parts = {c.name: c.to_dict() if detailed else {"ok": c.ok} for c in checks}
    return JsonResponse(
        {"status": "ok" if healthy else "down", **parts}, status=200 if healthy else 503
    )


# --- session list --------------------------------------------------------------------------


PAGE_SIZE = 25


def review_queue(user: User) -> QuerySet[Any]:  # sessions annotated with `waiting`
    """The sessions a reviewer works through: those waiting for their decision (paused, or
    generated and not yet decided) first, then the rest; newest first within each."""
    waiting = Case(When(status__in=statuses.DECIDABLE, then=0), default=1)
    return (
        ReviewSession.objects.visible_to(user)
        .annotate(waiting=waiting)
        .order_by("waiting", "-created_at", "-pk")
    )


@login_required
def session_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The reviewer's queue across their domains (reviewer/web/queue.py), live over ws/queue/."""
    queue.sweep_lapsed_claims()
    status = request.GET.get("status", "")
    rows = queue.loaded(review_queue(request.user)).annotate(pause_count=Count("pauses"))
    if status in statuses.STATUSES:
        rows = rows.filter(status=status)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    user = request.user
    waiting = queue.waiting_count(user)
    context = {
        "rows": queue.rows_for(page.object_list, user),
        "page": page,
        "status": status,
        "statuses": status_labels(),
        "domains": Domain.objects.all() if user.is_staff else user.review_domains.all(),
        "waiting_count": waiting,
        "queue_done": request.GET.get("done") == "1",
        "page_data": {
            "user": user.get_username(),
            "waitingCount": waiting,
            "csrf": get_token(request),
            "claimUrl": reverse("api-claim", args=[0]),
            "itemUrl": reverse("queue-item", args=[0]),
            "labels": queue.page_labels(),
            "statusLabels": status_labels(),
        },
    }
    return render(request, "reviewer/session_list.html", context)


@login_required
@require_GET
def next_case(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The newest other session waiting for this reviewer's decision, or the list saying that
    nothing is left."""
    current = request.GET.get("from", "")
    waiting = review_queue(request.user).filter(waiting=0)
    if current.isascii() and current.isdigit() and len(current) <= 18:  # else: no such session
        waiting = waiting.exclude(pk=int(current))
    found = waiting.first()
    if found is None:
        return redirect(reverse("session-list") + "?done=1")
    return redirect("session-page", session_id=found.pk)


# --- new session ---------------------------------------------------------------------------


TASK_LABELS = {
    "deterministic": gettext_lazy("Deterministic"),
    "open": gettext_lazy("Open"),
    "reasoning": gettext_lazy("Reasoning"),
}
TASK_SOURCES = {"classifier": gettext_lazy("classified"), "override": gettext_lazy("chosen")}
SHOWN_DECODING = {
    "temperature": gettext_lazy("temperature"),
    "top_p": gettext_lazy("top-p"),
    "top_k": gettext_lazy("top-k"),
    "repetition_penalty": gettext_lazy("repetition penalty"),
}


def decoding_summary(decoding: dict[str, Any]) -> str:
    """The sampling parameters a reviewer cares about, e.g. "temperature 0.7, top-p 0.9"."""
    shown = [
        f"{label} {decoding[name]}" for name, label in SHOWN_DECODING.items() if name in decoding
    ]
    if (decoding.get("attention") or {}).get("mode") == "gated":
        shown.append(str(gettext_lazy("gated attention")))
    return " · ".join(shown)


class DomainField(forms.ModelChoiceField[Domain]):
    def label_from_instance(self, obj: Domain) -> str:
        return obj.display_name


class NewSessionForm(forms.Form):
    domain = DomainField(
        queryset=Domain.objects.all(), label=gettext_lazy("Domain"), empty_label=None
    )
    input_text = forms.CharField(
        label=gettext_lazy("Case text"),
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text=gettext_lazy(
            "What the model should write about: the case, the clause, the risk."
        ),
    )
    seed = forms.IntegerField(
        label=gettext_lazy("Seed"),
        required=False,
        min_value=0,
        help_text=gettext_lazy("Same seed, same text. Leave empty for a random one."),
    )
    max_new_tokens = forms.IntegerField(
        label=gettext_lazy("Token limit"), min_value=1, max_value=4096
    )
    task_type = forms.ChoiceField(
        label=gettext_lazy("Task type"),
        required=False,
        choices=[
            ("", gettext_lazy("Automatic (classified from the text)")),
            ("deterministic", gettext_lazy("Deterministic")),
            ("open", gettext_lazy("Open")),
            ("reasoning", gettext_lazy("Reasoning")),
        ],
        help_text=gettext_lazy("Decides how the model decodes; automatic unless you choose."),
    )


@login_required
def session_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    initial = {"max_new_tokens": settings.CAESURA_MAX_NEW_TOKENS}
    form = NewSessionForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            started = start_from_form(request.user, form.cleaned_data)
        except lifecycle.CommandError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("session-page", session_id=started["id"])
    return render(request, "reviewer/session_new.html", {"form": form})


def start_from_form(user: User, data: dict[str, Any]) -> dict[str, Any]:
    return lifecycle.start_session(
        user,
        data["domain"].name,
        data["input_text"],
        seed=data["seed"],
        max_new_tokens=data["max_new_tokens"],
        task_type=data.get("task_type") or None,
    )


# --- the session page ----------------------------------------------------------------------


@login_required
def session_page(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    try:
        session = lifecycle.get_session_for(request.user, session_id)
    except lifecycle.NotFound:
        return render(request, "reviewer/not_found.html", status=404)
    status_label = status_labels().get(session.status, session.status)
    decision = last_decision(session) if session.is_final else None
    context = {
        "session": session,
        "case_text": session.case_text,  # without the anchor markup
        "status_label": status_label,
        "can_pause": session.status == ReviewSession.RUNNING,
        "can_resume": session.status in statuses.RESUMABLE,
        # Once nothing can run again (decided, cancelled, awaiting the decision), no control
        # that pauses or resumes is on the page, not even a greyed one.
        "has_run_controls": session.status in statuses.MAY_RUN,
        "decided_text": decided_text(status_label, decision_note(session)),
        "decision": decision,
        "stop_reason": stop_reason(session),
        # vLLM's kernels return no attention weights: the page says so instead of a blank plot.
        "live_attention": LIVE_ATTENTION in backend_features(),
        "task_label": TASK_LABELS.get(session.task_type, session.task_type),
        "task_source_label": TASK_SOURCES.get(session.task_source, session.task_source),
        "decoding_summary": decoding_summary(session.decoding),
        # A session started while every worker still loads its model waits minutes for its
        # first token on a first start (the compile): the page says why.
        "engine_loading": session.status == ReviewSession.RUNNING
        and not session.generated_ids
        and engine_loading(),
        **task_correction_context(session),
        "page_data": {
            "session": session.pk,
            # The page shows this state at once; the events up to last_seq only fill in the
            # tokens and heatmaps, they never replay an old status or pause over it.
            "status": session.status,
            "lastSeq": session.last_seq,
            "decisionComment": session.decision_comment,
            "decision": decision_data(decision),
            "user": request.user.get_username(),
            "maxNewTokens": session.max_new_tokens,
            "policyNames": policy_names(session.domain),
            "error": session_error(session) if session.status == ReviewSession.FAILED else "",
            "commandLabels": command_labels(),
            "glossary": glossary_of(session.domain),
            "labels": js_labels(),
            "maxMessageBytes": settings.SOCKET_MESSAGE_MAX_BYTES,
            "statusLabels": status_labels(),
            "reasonTemplates": reason_templates(),
            "mutedPolicies": session.muted_policies,
            "auditUrl": reverse("session-audit", args=[session.pk]),
            "redlineUrl": reverse("api-redline", args=[session.pk]),
            "features": sorted(backend_features()),
            "attentionMap": attention_map(session),
            "onFloor": session.owner_id is None,
            "claim": claims.claim_info(session),
            "claimMinutes": session.domain.claim_minutes,
            "claimedBy": session.claimed_by.username if session.claimed_by else None,
            "taskCorrection": correction_data(correction_of(session))["task_correction"],
        },
    }
    return render(request, "reviewer/session_detail.html", context)


def task_correction_context(session: ReviewSession) -> dict[str, Any]:
    """The task type choice under the case text: every type, the reviewer's last word on
    it selected (else the session's own)."""
    correction = correction_of(session)
    return {
        "can_correct_task": session.status in CORRECTABLE,
        "task_choices": list(TASK_LABELS.items()),
        "task_current": correction.corrected if correction else session.task_type,
    }


def attention_map(session: ReviewSession) -> dict[str, Any] | None:
    """Where the case text sits among the prompt's tokens, so the page can show attention on
    its words (see reviewer/web/tokenizer.py); None where the model's tokenizer is not here."""
    from reviewer.web.tokenizer import case_map  # loads a tokenizer: only for this page

    try:
        return case_map(session.prompt_ids, session.domain.system_prompt, session.input_text)
    except OSError:
        return None


def decision_data(record: AuditRecord | None) -> dict[str, Any] | None:
    """Who decided a finished session and when, for the page's script."""
    if record is None:
        return None
    return {"actor": record.actor, "time": record.created_at.isoformat()}


def decision_note(session: ReviewSession) -> str:
    """What the decision panel adds to a finished session's status: the reviewer's comment,
    or why a failed session failed."""
    return (
        session_error(session)
        if session.status == ReviewSession.FAILED
        else session.decision_comment
    )


def glossary_of(domain: Domain) -> list[dict[str, Any]]:
    terms = GlossaryTerm.objects.filter(glossary__domain=domain).order_by("term")
    return [
        {"id": t.pk, "term": t.term, "preferred": t.preferred, "code": t.code, "note": t.note}
        for t in terms
    ]


@login_required
@require_GET
def session_audit(request: AuthenticatedHttpRequest, session_id: int) -> JsonResponse:
    """The session's audit records as timeline entries, oldest first."""
    try:
        session = lifecycle.get_session_for(request.user, session_id)
    except lifecycle.NotFound:
        return JsonResponse({"error": _("Session not found")}, status=404)
    return JsonResponse({"entries": timeline(session, request.user)})


# --- static files browsers ask for at fixed addresses ----------------------------------------


@require_GET
def favicon(request: HttpRequest) -> FileResponse:
    """Browsers ask for /favicon.ico whatever the page links to: serve the app's icon there."""
    from django.contrib.staticfiles import finders

    found = finders.find("reviewer/favicon.ico")
    if not found:
        raise Http404("favicon.ico is missing from the static files")
    icon = Path(found).open("rb")  # noqa: SIM115 - FileResponse closes it
    response = FileResponse(icon, content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


# --- vendored JavaScript -------------------------------------------------------------------


def plotly_path() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@require_GET
def plotly_js(request: HttpRequest) -> FileResponse:
    """Plotly ships inside the pinned Python package: serve that copy, so no CDN is needed."""
    path = plotly_path()
    if not path.is_file():
        raise Http404("plotly.min.js is missing from the plotly package")
    response = FileResponse(path.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=86400"
    return response
