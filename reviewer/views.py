"""Pages of the reviewer UI. Thin: look up, call services, render. The live part of the
session page runs in the browser over the session's websocket."""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET

from reviewer import services
from reviewer.health import check_database, check_redis, check_worker
from reviewer.models import AuditRecord, Domain, GlossaryTerm, ReviewSession
from reviewer.ui_text import (
    audit_entry,
    command_labels,
    decided_text,
    js_labels,
    reason_templates,
    status_labels,
)


def healthz(request: HttpRequest) -> JsonResponse:
    checks = [check_database(), check_redis(), check_worker()]
    healthy = all(check.ok for check in checks)
    body = {"status": "ok" if healthy else "down", **{c.name: c.to_dict() for c in checks}}
    return JsonResponse(body, status=200 if healthy else 503)


# --- session list --------------------------------------------------------------------------


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")
    rows = (
        ReviewSession.objects.visible_to(request.user)
        .select_related("domain", "owner")
        .annotate(pause_count=Count("pauses"))
    )
    if status in dict(ReviewSession.STATUSES):
        rows = rows.filter(status=status)
    context = {
        "sessions": rows[:200],
        "status": status,
        "statuses": status_labels(),
        "domains": Domain.objects.all(),
    }
    return render(request, "reviewer/session_list.html", context)


# --- new session ---------------------------------------------------------------------------


TASK_LABELS = {
    "deterministic": gettext_lazy("Deterministic"),
    "open": gettext_lazy("Open"),
    "reasoning": gettext_lazy("Reasoning"),
}
TASK_SOURCES = {"classifier": gettext_lazy("classified"), "override": gettext_lazy("chosen")}
SHOWN_DECODING = ["temperature", "top_p", "top_k", "repetition_penalty"]


def decoding_summary(decoding: dict) -> str:
    """The sampling parameters a reviewer cares about, e.g. "temperature 0.7, top_p 0.9"."""
    return ", ".join(f"{name} {decoding[name]}" for name in SHOWN_DECODING if name in decoding)


class NewSessionForm(forms.Form):
    domain = forms.ModelChoiceField(
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
def session_new(request: HttpRequest) -> HttpResponse:
    initial = {"max_new_tokens": settings.CAESURA_MAX_NEW_TOKENS}
    form = NewSessionForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            started = start_from_form(request.user, form.cleaned_data)
        except services.CommandError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("session-page", session_id=started["id"])
    return render(request, "reviewer/session_new.html", {"form": form})


def start_from_form(user, data: dict) -> dict:
    return services.start_session(
        user,
        data["domain"].name,
        data["input_text"],
        seed=data["seed"],
        max_new_tokens=data["max_new_tokens"],
        task_type=data.get("task_type") or None,
    )


# --- the session page ----------------------------------------------------------------------


@login_required
def session_page(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        session = services.get_session_for(request.user, session_id)
    except services.NotFound:
        return render(request, "reviewer/not_found.html", status=404)
    status_label = status_labels().get(session.status, session.status)
    context = {
        "session": session,
        "status_label": status_label,
        "can_pause": session.status == ReviewSession.RUNNING,
        "can_resume": session.status in services.RESUMABLE,
        "decided_text": decided_text(status_label, decision_note(session)),
        "task_label": TASK_LABELS.get(session.task_type, session.task_type),
        "task_source_label": TASK_SOURCES.get(session.task_source, session.task_source),
        "decoding_summary": decoding_summary(session.decoding),
        "page_data": {
            "session": session.pk,
            # The page shows this state at once; the events up to last_seq only fill in the
            # tokens and heatmaps, they never replay an old status or pause over it.
            "status": session.status,
            "lastSeq": session.last_seq,
            "decisionComment": session.decision_comment,
            "error": session.error if session.status == ReviewSession.FAILED else "",
            "commandLabels": command_labels(),
            "glossary": glossary_of(session.domain),
            "labels": js_labels(),
            "statusLabels": status_labels(),
            "reasonTemplates": reason_templates(),
            "mutedPolicies": session.muted_policies,
            "auditUrl": reverse("session-audit", args=[session.pk]),
        },
    }
    return render(request, "reviewer/session_detail.html", context)


def decision_note(session: ReviewSession) -> str:
    """What the decision panel adds to a finished session's status: the reviewer's comment,
    or why a failed session failed."""
    return session.error if session.status == ReviewSession.FAILED else session.decision_comment


def glossary_of(domain: Domain) -> list[dict]:
    terms = GlossaryTerm.objects.filter(glossary__domain=domain).order_by("term")
    return [
        {"id": t.pk, "term": t.term, "preferred": t.preferred, "code": t.code, "note": t.note}
        for t in terms
    ]


@login_required
@require_GET
def session_audit(request: HttpRequest, session_id: int) -> JsonResponse:
    """The session's audit records as timeline entries, oldest first."""
    try:
        session = services.get_session_for(request.user, session_id)
    except services.NotFound:
        return JsonResponse({"error": _("Session not found")}, status=404)
    records = AuditRecord.objects.filter(session=session).order_by("id")
    return JsonResponse({"entries": [audit_entry(r) for r in records]})


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
