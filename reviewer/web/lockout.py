"""Login throttling (django-axes): the login page that says an account is locked, and the audit
record and log line of each lockout."""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from reviewer.lifecycle import audit

log = logging.getLogger(__name__)


def lockout_minutes() -> int:
    return max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))


def lockout_response(request: HttpRequest, *args: object) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the app's login page, saying so, for /login/ and /admin/login/.
    (axes passes the original response and the credentials, or only the credentials.)"""
    next_url = request.POST.get("next") or request.GET.get("next", "")
    if not next_url and request.path_info.startswith("/admin/"):
        next_url = "/admin/"
    context = {"locked_out": True, "minutes": lockout_minutes(), "next": next_url}
    return render(request, "registration/login.html", context, status=429)


def on_locked_out(
    sender: object,
    request: HttpRequest | None = None,
    username: str | None = None,
    ip_address: str | None = None,
    **kwargs: object,
) -> None:
    """axes sends this on the failure that locks, and again on each attempt during the lockout:
    every one is logged, the lockout itself is audited once."""
    name = (username or "")[:150]
    path = request.path_info if request is not None else ""
    failures = getattr(request, "axes_failures_since_start", None)
    log.warning(
        "Login locked out: username=%r address=%s path=%s failures=%s",
        name,
        ip_address,
        path,
        failures,
    )
    if failures == settings.AXES_FAILURE_LIMIT:
        audit.append(
            "login_locked_out",
            name or "anonymous",
            payload={
                "username": name,
                "ip_address": ip_address,
                "path": path,
                "failures": failures,
                "minutes": lockout_minutes(),
            },
        )
