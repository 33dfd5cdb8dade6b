"""The JSON HTTP API: parse the request, call services, serialize. Errors are {"error": message}."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, cast

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from reviewer import events, lifecycle
from reviewer.lifecycle.task_corrections import correction_data, correction_of
from reviewer.models import PauseEvent, ReviewSession
from reviewer.web import arguments, auth, bodies, command_table, openapi
from reviewer.web.auth import AuthenticatedHttpRequest

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
LIST_LIMIT = 100


def error(status: int, message: str, code: str | None = None) -> JsonResponse:
    body = {"error": message} if code is None else {"error": message, "code": code}
    return JsonResponse(body, status=status)


class ApiView(Protocol):
    methods: tuple[str, ...]  # for the API description and its test
    __name__: str

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse: ...


def allows(*methods: str) -> Callable[[Callable[..., HttpResponse]], ApiView]:
    """Record the methods a view takes, for the API description and its test."""

    def mark(view: Callable[..., HttpResponse]) -> ApiView:
        marked = cast(ApiView, view)
        marked.methods = methods
        return marked

    return mark


def api_view(*methods: str) -> Callable[[Callable[..., HttpResponse]], ApiView]:
    """Allow these methods, authenticate by token or cookie, and turn CommandError into JSON."""

    def wrap(view: Callable[..., HttpResponse]) -> ApiView:
        @csrf_exempt  # cookie-authenticated calls are checked in authenticate(); tokens are exempt
        @functools.wraps(view)
        def run(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error(405, f"Method {request.method} not allowed")
                response["Allow"] = ", ".join(methods)
                return response
            refused = authenticate(request)
            if refused is not None:
                return refused
            try:
                return view(request, *args, **kwargs)
            except lifecycle.CommandError as exc:
                response = error(exc.status, str(exc), exc.code)
                if (retry_after := getattr(exc, "retry_after", None)) is not None:
                    response["Retry-After"] = str(retry_after)
                return response

        return allows(*methods)(run)

    return wrap


def authenticate(request: HttpRequest) -> JsonResponse | None:
    try:
        user = auth.token_user(request)
    except auth.BadCredentials as exc:
        return unauthorized(str(exc))
    if user is not None:
        request.user = user
        return None
    if not request.user.is_authenticated:
        return unauthorized("Authentication required: log in or send 'Authorization: Token <key>'")
    if request.method not in SAFE_METHODS and not auth.csrf_passes(request):
        return error(403, "CSRF check failed: send the X-CSRFToken header, or use a token")
    return None


def unauthorized(message: str) -> JsonResponse:
    response = error(401, message)
    response["WWW-Authenticate"] = "Token"
    return response


def body_of(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        return {}
    data = arguments.loads(request.body)
    if not isinstance(data, dict):
        raise lifecycle.InvalidInput(_("Request body must be a JSON object"))
    return data


# --- serializers ---------------------------------------------------------------------------


def session_summary(session: ReviewSession) -> dict[str, Any]:
    return {
        "id": session.pk,
        "status": session.status,
        "domain": session.domain.name,
        "owner": session.owner.username if session.owner else None,
        "reviewer": session.reviewer_name or None,
        "application": session.application.name if session.application else None,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def session_detail(session: ReviewSession, attention: bool = False) -> dict[str, Any]:
    return {
        **session_summary(session),
        "input": session.input_text,
        "model": session.model_name,
        "seed": session.seed,
        "max_new_tokens": session.max_new_tokens,
        "decoding": session.decoding,
        "pause_budget": session.pause_budget,
        "muted_policies": session.muted_policies,
        "task_type": session.task_type,
        "task_source": session.task_source,
        **correction_data(correction_of(session)),
        "text": session.text,
        "token_ids": session.generated_ids,
        "ids_seq": session.ids_seq,
        "last_seq": session.last_seq,
        "error": session.error,
        "decision_comment": session.decision_comment,
        "finished_at": _iso(session.finished_at),
        "pauses": [pause_json(p, attention) for p in session.pauses.all()],
        "edits": [e.as_dict() for e in session.edits.select_related("author")],
    }


def pause_json(pause: PauseEvent, attention: bool = False) -> dict[str, Any]:
    data = {
        "id": pause.pk,
        "position": pause.position,
        "trigger": pause.trigger,
        "kind": pause.kind,
        "reason": pause.reason,
        "evidence": pause.evidence,
        "alternatives": pause.alternatives,
        "latency_ms": pause.latency_ms,
        "outcome": pause.outcome,
        "requested_at": _iso(pause.requested_at),
        "halted_at": _iso(pause.halted_at),
        "resumed_at": _iso(pause.resumed_at),
    }
    if attention:
        data["attention"] = pause.attention
    return data


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# --- views ---------------------------------------------------------------------------------


@api_view("GET", "POST")
def sessions(request: AuthenticatedHttpRequest) -> JsonResponse:
    if request.method == "POST":
        return start_session(request)
    limit = min(
        arguments.query_integer(request.GET.get("limit"), arguments.LIMIT, LIST_LIMIT), 1000
    )
    rows = ReviewSession.objects.visible_to(request.user).select_related("domain", "owner")
    return JsonResponse({"sessions": [session_summary(s) for s in rows[:limit]]})


def start_session(request: AuthenticatedHttpRequest) -> JsonResponse:
    data = body_of(request)
    command_id = bodies.command_id_of(data)
    given = bodies.read(bodies.StartBody, data)
    result = lifecycle.start_session(
        request.user,
        given.pop("domain"),
        given.pop("input"),
        **given,
        command_id=command_id,
    )
    return JsonResponse(result, status=201)


@api_view("GET")
def session(request: AuthenticatedHttpRequest, session_id: int) -> JsonResponse:
    found = lifecycle.get_session_for(request.user, session_id)
    attention = request.GET.get("attention") in ("1", "true")
    return JsonResponse(session_detail(found, attention))


@api_view("GET")
def session_events(request: AuthenticatedHttpRequest, session_id: int) -> JsonResponse:
    found = lifecycle.get_session_for(request.user, session_id)
    after = arguments.query_integer(request.GET.get("after"), arguments.AFTER, 0)
    return JsonResponse({"events": events.events_after(found.pk, after)})


REDLINE_TYPES = {
    "html": "text/html; charset=utf-8",
    "docx": openapi.DOCX,
}


@api_view("GET")
def session_redline(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    """The reviewed text as a redline: HTML (default), DOCX with tracked changes, or JSON."""
    from reviewer.documents import redline, redline_docx

    found = lifecycle.get_session_for(request.user, session_id)
    kind = request.GET.get("format", "html")
    if kind == "json":
        return JsonResponse(redline.as_json(found))
    if kind not in REDLINE_TYPES:
        return error(400, "format must be html, docx or json")
    body = redline.as_html(found) if kind == "html" else redline_docx.as_docx(found)
    response = HttpResponse(body, content_type=REDLINE_TYPES[kind])
    response["Content-Disposition"] = f'attachment; filename="session-{found.pk}-redline.{kind}"'
    return response


def command_view(name: str) -> ApiView:
    status = command_table.COMMANDS[name].status

    @api_view("POST")
    def view(request: AuthenticatedHttpRequest, session_id: int) -> JsonResponse:
        result = command_table.run(request.user, session_id, name, body_of(request))
        return JsonResponse(result, status=status)

    view.__name__ = f"{name}_session"
    return view


@api_view("POST")
def token(request: AuthenticatedHttpRequest) -> JsonResponse:
    key = auth.issue_token(request.user)
    return JsonResponse({"key": key, "user": request.user.username}, status=201)


@allows("GET")
@csrf_exempt
def schema(request: HttpRequest) -> JsonResponse:
    """The OpenAPI description of this API; public, like the API's documentation. GET only:
    the ASGI server sends a HEAD answer's body too, which a kept-alive connection would read
    as the next answer."""
    if request.method != "GET":
        response = error(405, f"Method {request.method} not allowed")
        response["Allow"] = "GET"
        return response
    return JsonResponse(openapi.description())


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return error(404, f"No API endpoint at {request.path}")
