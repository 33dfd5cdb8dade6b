"""Error answers: JSON `{"error": message}` under /api/, a readable translated page elsewhere,
and never a traceback, a setting or the URL list, whatever DEBUG says for the API."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    DisallowedHost,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
GATEWAY_PREFIX = "/v1/"  # the review gateway: OpenAI's error shape (reviewer/gateway/errors.py)


def is_gateway(request: HttpRequest) -> bool:
    return request.path_info.startswith(GATEWAY_PREFIX)


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX) or is_gateway(request)


def json_error(request: HttpRequest, status: int, message: str) -> JsonResponse:
    if is_gateway(request):
        from reviewer.gateway.errors import error_response

        return error_response(status, message)
    return JsonResponse({"error": message}, status=status)


def busy(request: HttpRequest) -> JsonResponse:
    """Postgres out of reach, or none of the web server's pooled connections free in time."""
    answer = json_error(request, 503, "The database is out of reach or busy; try again shortly")
    answer["Retry-After"] = "5"
    return answer


def body_limit() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large(request: HttpRequest) -> HttpResponse:
    limit = body_limit()
    if is_api(request):
        return json_error(request, 413, f"Request body too large: the limit is {limit} bytes")
    return render(request, "413.html", {"limit": limit}, status=413)


def declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class ApiErrorsMiddleware(MiddlewareMixin):
    """Under /api/: refuse a bad Host or an oversized body before anything reads it, and turn
    any exception a view lets out into a JSON answer (an unexpected one is logged here, with
    its traceback, and answered 500 without details)."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if not is_api(request):
            return None
        try:
            request.get_host()
        except DisallowedHost as exc:
            logging.getLogger("django.security.DisallowedHost").warning("%s", exc)
            return json_error(request, 400, "Invalid Host header: not in ALLOWED_HOSTS")
        if declared_length(request) > body_limit():
            log.warning("Refused a %s-byte body for %s", declared_length(request), request.path)
            return too_large(request)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_api(request):
            return None  # the handlers below answer with a page
        if isinstance(exception, RequestDataTooBig):
            return too_large(request)  # a chunked body has no Content-Length to check first
        if isinstance(exception, Http404):
            return json_error(request, 404, "Not found")
        if isinstance(exception, PermissionDenied):
            return json_error(request, 403, "Permission denied")
        if isinstance(exception, (SuspiciousOperation, BadRequest)):
            log.warning("Bad request to %s: %s", request.path, exception)
            return json_error(request, 400, "Bad request")
        if isinstance(exception, OperationalError):  # not a bug: the client may try again
            log.warning("No database for %s %s: %s", request.method, request.path, exception)
            return busy(request)
        log.exception("Internal error answering %s %s", request.method, request.path)
        return json_error(request, 500, "Internal server error")


# --- handlers for what happens outside a view (urls.py names them) ---------------------------


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        return too_large(request)
    if is_api(request):
        if isinstance(exception, DisallowedHost):
            return json_error(request, 400, "Invalid Host header: not in ALLOWED_HOSTS")
        return json_error(request, 400, "Bad request")
    return render(request, "400.html", status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return json_error(request, 403, "Permission denied")
    return render(request, "403.html", status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return json_error(request, 404, f"No API endpoint at {request.path}")
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return json_error(request, 500, "Internal server error")
    # No request context: the page must render even when the database is what failed.
    return HttpResponse(render_to_string("500.html"), status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    if is_api(request):
        return json_error(
            request, 403, "CSRF check failed: send the X-CSRFToken header, or use a token"
        )
    return render(request, "403.html", {"csrf_failed": True}, status=403)
