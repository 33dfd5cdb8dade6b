"""A reviewer command runs once per client command id: a repeat (a resend after a dropped
connection) answers with the first result instead of acting twice."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext as _

from reviewer.lifecycle.transitions import Conflict
from reviewer.models import CommandReceipt

if TYPE_CHECKING:
    from django.contrib.auth.models import User

COMMAND_LOCK_SPACE = 0x0CAE_5C1D  # first key of the two-key advisory locks on command ids


Result = dict[str, Any]
Service = Callable[..., Result]  # (user, session id or start's fields, ...) -> its answer


def idempotent(command: str) -> Callable[[Service], Service]:
    """Run a command once per client command id; a repeat returns the first result."""

    def wrap(func: Service) -> Service:
        @functools.wraps(func)
        def run(user: User, *args: Any, command_id: str | None = None, **kwargs: Any) -> Result:
            if not command_id:
                return func(user, *args, **kwargs)
            with transaction.atomic():
                _lock_command_id(user.pk, command_id)
                seen = CommandReceipt.objects.filter(user=user, command_id=command_id).first()
                if seen is not None:
                    _check_same_command(seen, command, args)
                    return {**seen.result, "repeated": True}
                result = func(user, *args, **kwargs)
                _keep_receipt(user, command_id, command, result)
                return result

        return run

    return wrap


def _check_same_command(seen: CommandReceipt, command: str, args: tuple[Any, ...]) -> None:
    """A repeat is the same command on the same session (a start: any start); an id used for
    another is refused, never answered with that one's result (which said it was done)."""
    same = seen.command == command
    if same and command != "start":
        same = bool(args) and str(args[0]) == str(seen.session_id)
    if not same:
        raise Conflict(
            _(
                "Command id %(id)r was used for %(command)s of session %(session)s; send each"
                " command with a new command_id"
            )
            % {"id": seen.command_id, "command": seen.command, "session": seen.session_id}
        )


def _keep_receipt(user: User, command_id: str, command: str, result: dict[str, Any]) -> None:
    try:
        with transaction.atomic():
            CommandReceipt.objects.create(
                user=user,
                command_id=command_id,
                command=command,
                result=result,
                session_id=result.get("id"),
            )
    except IntegrityError:  # not expected while the id is locked: refuse, don't 500
        raise Conflict(_("Command %(id)s is already being handled") % {"id": command_id}) from None


def _lock_command_id(user_id: int, command_id: str) -> None:
    """One request per (user, command id) at a time, until its transaction ends: a repeat
    sent while the first is still running waits, then answers with the first's result."""
    digest = hashlib.sha256(f"{user_id}:{command_id}".encode()).digest()
    key = int.from_bytes(digest[:4], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [COMMAND_LOCK_SPACE, key])
