"""Login throttling on a floor: what a lockout locks and for how long (django-axes hooks).

A hospital's reviewers all come from one NAT address, so one person's wrong passwords must lock
their account, not the floor. axes locks the account and the (account, address) pair
(AXES_LOCKOUT_PARAMETERS); this module adds what axes lacks:

- back-off: each lockout of an account within CAESURA_LOGIN_BACKOFF_HOURS doubles the next one,
  up to CAESURA_LOGIN_LOCKOUT_MAX_MINUTES (``cool_off``, axes' AXES_COOLOFF_TIME);
- an address-wide lock, only after CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT failures from one address
  within the base cool-off, whatever the accounts (``FloorLockoutHandler``);
- a lock on slow guessing: four wrong passwords every quarter of an hour never reach the limit
  above, so CAESURA_LOGIN_DAY_FAILURE_LIMIT guesses at an account within
  CAESURA_LOGIN_BACKOFF_HOURS since its last login lock it until the oldest of them is that old
  (axes' failure log keeps each failure; attempts refused during a lock are marked there and are
  not guesses, so retrying does not prolong it; deleting the account's entries unlocks it). Where
  the account limit keys on the (account, address) pair alone, so does this lock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt, AccessAttemptExpiration, AccessFailureLog, AccessLog
from axes.signals import user_locked_out
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest
from django.utils import timezone

from reviewer.models import AuditRecord

ACCOUNT, ADDRESS, SLOW = "account", "address", "slow"


def base_cool_off() -> timedelta:
    return timedelta(minutes=settings.CAESURA_LOGIN_LOCKOUT_MINUTES)


def memory() -> timedelta:
    """How far back an account's lockouts and guesses are remembered."""
    return timedelta(hours=settings.CAESURA_LOGIN_BACKOFF_HOURS)


def account_lockouts(username: str) -> int:
    """The account's lockouts within the back-off memory, as the audit chain holds them."""
    since = timezone.now() - memory()
    records = AuditRecord.objects.filter(
        action="login_locked_out", payload__username=username, created_at__gte=since
    )
    return records.exclude(payload__scope__in=(ADDRESS, SLOW)).count()


def backoff(lockouts: int) -> timedelta:
    """How long the n-th lockout in the memory lasts: base, then doubling, capped."""
    base = base_cool_off()
    cap = max(base, timedelta(minutes=settings.CAESURA_LOGIN_LOCKOUT_MAX_MINUTES))
    factor: int = 2 ** min(max(0, lockouts - 1), 32)
    return min(base * factor, cap)


def account_cool_off(username: str | None) -> timedelta:
    return backoff(account_lockouts(username[:150])) if username else base_cool_off()


def cool_off(request: HttpRequest | None = None) -> timedelta:
    """AXES_COOLOFF_TIME: how long the account named in the request stays locked."""
    if request is None:
        return base_cool_off()
    return account_cool_off(get_client_username(request))


def pair_only() -> bool:
    """Whether the account limit keys on the (account, address) pair alone
    (CAESURA_LOGIN_LOCKOUT_BY): then nobody elsewhere may lock the account, slowly either."""
    return "username" not in settings.AXES_LOCKOUT_PARAMETERS


def slow_guesses(username: str, address: str | None) -> QuerySet[AccessFailureLog]:
    """The account's failed logins within the back-off memory and since its last login that
    were guesses (not refused during a lock); from ``address`` alone where the limit keys on
    the pair."""
    since = timezone.now() - memory()
    last_login = AccessLog.objects.filter(username=username).order_by("-attempt_time").first()
    if last_login is not None:
        since = max(since, last_login.attempt_time)
    guesses: QuerySet[AccessFailureLog] = AccessFailureLog.objects.filter(
        username=username[:150], attempt_time__gt=since, locked_out=False
    )
    return guesses.filter(ip_address=address) if pair_only() else guesses


def slow_lock_left(username: str | None, address: str | None) -> timedelta:
    """How long the account (or pair) stays locked for slow guessing (zero: it is not): until
    the oldest of its last day-limit guesses leaves the back-off memory."""
    if not username:
        return timedelta(0)
    limit = settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT
    newest = slow_guesses(username, address).order_by("-attempt_time")
    times: list[datetime] = list(newest.values_list("attempt_time", flat=True)[:limit])
    if len(times) < limit:
        return timedelta(0)
    return max(timedelta(0), times[-1] + memory() - timezone.now())


def mark_refused(username: str | None, refused: bool) -> None:
    """axes logs a failure as locked out by what it knew after counting it: the guess that
    reached its limit is marked too, and an attempt refused by the slow lock is not. The
    newest entry of the account is this attempt's: mark it by whether a lock refused it."""
    newest = AccessFailureLog.objects.filter(username=username).order_by("-id").first()
    if newest is not None and newest.locked_out != refused:
        AccessFailureLog.objects.filter(pk=newest.pk).update(locked_out=refused)


def address_failures(request: HttpRequest) -> int:
    """Failed logins from the request's address, for any account, within the base cool-off."""
    since = request.axes_attempt_time - base_cool_off()  # type: ignore[attr-defined]
    attempts = AccessAttempt.objects.filter(
        ip_address=request.axes_ip_address,  # type: ignore[attr-defined]
        attempt_time__gte=since,
    )
    total = attempts.aggregate(total=Sum("failures_since_start"))["total"]
    return int(total or 0)


def lockout_scope(request: HttpRequest) -> str:
    """What locked this request: its account (or pair) unless the handler said the address."""
    return str(getattr(request, "caesura_lockout_scope", ACCOUNT))


class FloorLockoutHandler(AxesDatabaseHandler):  # type: ignore[misc]  # axes ships no types
    """axes' database handler plus the address-wide lock past its own, much higher limit."""

    def is_locked(self, request: Any, credentials: dict[str, Any] | None = None) -> bool:
        if super().is_locked(request, credentials):
            return True
        if address_failures(request) >= settings.CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT:
            return True
        return self.slowly_locked(request, credentials)

    def slowly_locked(self, request: Any, credentials: dict[str, Any] | None) -> bool:
        username = get_client_username(request, credentials)
        return slow_lock_left(username, request.axes_ip_address) > timedelta(0)

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        # Refused by a lock: the password was never checked, so it is no guess.
        slowly = request is not None and self.slowly_locked(request, credentials)
        refused = slowly or (request is not None and self.is_locked(request, credentials))
        if slowly:
            request.axes_locked_out = True  # axes says so for its own locks only
        if request is not None:
            self.forget_ended_attempts(request, credentials)
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or self.is_whitelisted(request, credentials):
            return
        self.keep_attempts_for_the_lockout(request, credentials)
        self.lock_slow_guessing(request, credentials, refused, slowly)
        failures = address_failures(request)
        limit = settings.CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT
        if failures < limit or (request.axes_locked_out and failures > limit):
            return  # not locked by address, or locked by account and already told so
        request.axes_locked_out = True
        request.axes_credentials = credentials
        request.caesura_lockout_scope = ADDRESS
        request.caesura_address_failures = failures
        user_locked_out.send(
            "axes",
            request=request,
            username=get_client_username(request, credentials),
            ip_address=request.axes_ip_address,
        )

    def lock_slow_guessing(
        self, request: Any, credentials: dict[str, Any], refused: bool, slowly: bool
    ) -> None:
        """The guess that reaches the day limit locks the account and is told as a lockout (and
        audited, reviewer/web/lockout.py), even where it reached axes' own limit too; an attempt
        refused by that lock is told (logged) again. Failures older than the memory go here."""
        AccessFailureLog.objects.filter(attempt_time__lt=timezone.now() - memory()).delete()
        username = get_client_username(request, credentials)
        mark_refused(username, refused)
        if refused and not slowly:
            return  # refused by another lock, which said so
        guesses = None if refused else slow_guesses(username, request.axes_ip_address).count()
        if not refused and guesses != settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT:
            return
        request.axes_locked_out = True
        request.axes_credentials = credentials
        request.caesura_lockout_scope = SLOW
        request.caesura_slow_failures = guesses
        user_locked_out.send(
            "axes", request=request, username=username, ip_address=request.axes_ip_address
        )

    def forget_ended_attempts(self, request: Any, credentials: dict[str, Any]) -> None:
        """An account's attempts older than its cool-off no longer count: drop them before axes
        adds this failure to one of them, so the count starts afresh."""
        username = get_client_username(request, credentials)
        if username:
            ended = request.axes_attempt_time - get_cool_off(request)
            AccessAttempt.objects.filter(username=username, attempt_time__lt=ended).delete()

    def keep_attempts_for_the_lockout(self, request: Any, credentials: dict[str, Any]) -> None:
        """axes set each attempt's expiry before this failure's lockout was audited: a longer
        (backed-off) lockout must keep all the account's attempts until it ends."""
        username = get_client_username(request, credentials)
        if not username:
            return
        until = request.axes_attempt_time + get_cool_off(request)
        AccessAttemptExpiration.objects.filter(
            access_attempt__username=username, expires_at__lt=until
        ).update(expires_at=until)
