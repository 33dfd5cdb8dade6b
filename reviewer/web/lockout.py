"""Login throttling (django-axes): the login page that says an account is locked, and the audit
record and log line of each lockout."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from reviewer.lifecycle import audit
from reviewer.web.floor_lockout import (
    ADDRESS,
    SLOW,
    account_cool_off,
    account_lockouts,
    backoff,
    base_cool_off,
    lockout_scope,
    slow_lock_left,
)

log = logging.getLogger(__name__)


def minutes(cool_off: timedelta) -> int:
    return max(1, round(cool_off.total_seconds() / 60))


def lockout_minutes(request: HttpRequest) -> int:
    """How long this lockout lasts: the account's (backed-off) cool-off, or its lock for slow
    guessing where that lasts longer, or the address's."""
    if lockout_scope(request) == ADDRESS:
        return minutes(base_cool_off())
    username = str(request.POST.get("username", ""))
    slow = slow_lock_left(username, getattr(request, "axes_ip_address", None))
    return minutes(max(account_cool_off(username), slow))


def lockout_response(request: HttpRequest, *args: object) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the app's login page, saying so, for /login/ and /admin/login/.
    (axes passes the original response and the credentials, or only the credentials.)"""
    next_url = request.POST.get("next") or request.GET.get("next", "")
    if not next_url and request.path_info.startswith("/admin/"):
        next_url = "/admin/"
    context = {"locked_out": True, "minutes": lockout_minutes(request), "next": next_url}
    return render(request, "registration/login.html", context, status=429)


def on_locked_out(
    sender: object,
    request: HttpRequest | None = None,
    username: str | None = None,
    ip_address: str | None = None,
    **kwargs: object,
) -> None:
    """axes sends this on the failure that locks, and again on each attempt during the lockout:
    every one is logged, the lockout itself is audited once. The scope says what is locked: the
    account (and the account from that address), the account guessed at slowly ("slow"), or,
    past the much higher limit, the address."""
    if request is None:
        return
    name = (username or "")[:150]
    scope = lockout_scope(request)
    if scope == ADDRESS:
        failures = getattr(request, "caesura_address_failures", None)
        limit = settings.CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT
    elif scope == SLOW:
        failures = getattr(request, "caesura_slow_failures", None)
        limit = settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT
    else:
        failures = getattr(request, "axes_failures_since_start", None)
        limit = settings.AXES_FAILURE_LIMIT
    log.warning(
        "Login locked out: scope=%s username=%r address=%s path=%s failures=%s",
        scope,
        name,
        ip_address,
        request.path_info,
        failures,
    )
    if failures == limit:
        starting = (
            slow_lock_left(name, ip_address)
            if scope == SLOW
            else backoff(account_lockouts(name) + 1)
        )  # an account's lockout is not yet in the chain
        audit.append(
            "login_locked_out",
            name or "anonymous",
            payload={
                "scope": scope,
                "username": name,
                "ip_address": ip_address,
                "path": request.path_info,
                "failures": failures,
                "minutes": minutes(base_cool_off() if scope == ADDRESS else starting),
            },
        )
