"""A session's audit graphs: the page that draws each one with why it paused there, and their
exports for auditors (W3C PROV-JSON and plain JSON). Thin: look up, hand to the analytics."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from reviewer import lifecycle
from reviewer.analytics import provenance
from reviewer.analytics.graph_drawing import drawing
from reviewer.analytics.graph_story import why
from reviewer.analytics.timeline import policy_names
from reviewer.models import ReviewSession
from reviewer.web.auth import AuthenticatedHttpRequest


@login_required
@require_GET
def audit_graphs(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    try:
        session = lifecycle.get_session_for(request.user, session_id)
    except lifecycle.NotFound:
        return render(request, "reviewer/not_found.html", status=404)
    names = policy_names(session.domain)
    graphs = [shown(row.graph, names) | {"row": row} for row in provenance.graphs_of(session)]
    context = {"session": session, "graphs": graphs}
    return render(request, "reviewer/audit_graphs.html", context)


def shown(graph: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {"why": why(graph, names), "drawing": drawing(graph, names)}


@login_required
@require_GET
def audit_graphs_json(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    return export(request, session_id, provenance.plain, "audit-graphs")


@login_required
@require_GET
def audit_graphs_prov(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    return export(request, session_id, provenance.prov, "audit-graphs.prov")


def export(
    request: AuthenticatedHttpRequest,
    session_id: int,
    build: Any,
    name: str,
) -> HttpResponse:
    try:
        session: ReviewSession = lifecycle.get_session_for(request.user, session_id)
    except lifecycle.NotFound:
        return JsonResponse({"error": _("Session not found")}, status=404)
    body = json.dumps(build(session), ensure_ascii=False, indent=1)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}-{name}.json"'
    return response
