"""Reviewer commands as clients send them: one table shared by the HTTP API, the websocket
and the API description. Each command's body is a pydantic model (reviewer/web/bodies.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext as _

from reviewer import lifecycle
from reviewer.lifecycle.idempotency import Service
from reviewer.web import arguments, bodies
from reviewer.web.arguments import InvalidInput

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True)
class Command:
    func: Service
    body: type[bodies.CommandBody] = bodies.CommandBody  # what the request body may hold
    status: int = 200  # 202 where a worker applies the change after the reply
    summary: str = ""

    def arguments(self, body: dict[str, Any]) -> dict[str, Any]:
        """The arguments the body gives, checked by its model; other keys are ignored."""
        return bodies.read(self.body, body)


COMMANDS: dict[str, Command] = {
    "pause": Command(lifecycle.pause, summary="Ask the worker to pause at the next token"),
    "resume": Command(lifecycle.resume, summary="Continue a paused session"),
    "rollback": Command(
        lifecycle.rollback,
        body=bodies.RollbackBody,
        status=202,
        summary="Drop the generated tokens from a position on",
    ),
    "edit": Command(
        lifecycle.edit,
        body=bodies.EditBody,
        status=202,
        summary="Replace a span of the generated text",
    ),
    "choose": Command(
        lifecycle.choose,
        body=bodies.ChooseBody,
        status=202,
        summary="Make an offered alternative the next token",
    ),
    "approve": Command(lifecycle.approve, body=bodies.ApproveBody, summary="Accept the text"),
    "reject": Command(lifecycle.reject, body=bodies.RejectBody, summary="Refuse the text"),
    "cancel": Command(lifecycle.cancel, summary="Stop the session for good"),
    "attention": Command(
        lifecycle.attention,
        body=bodies.AttentionBody,
        status=202,
        summary="Ask for one layer's attention per head at the pause",
    ),
    "mute": Command(
        lifecycle.mute,
        body=bodies.PolicyBody,
        summary="At a pause: silence one policy for the rest of the session",
    ),
    "unmute": Command(
        lifecycle.unmute,
        body=bodies.PolicyBody,
        summary="At a pause: let a muted policy fire again",
    ),
    "correct_task": Command(
        lifecycle.correct_task,
        body=bodies.CorrectTaskBody,
        summary="Say which task type the input is (audited; for the classifier's accuracy)",
    ),
    "claim": Command(
        lifecycle.claim, summary="Take a waiting gateway session from the domain's queue"
    ),
    "release": Command(lifecycle.release, summary="Give a claimed session back to the queue"),
    "reassign": Command(
        lifecycle.reassign,
        body=bodies.ReassignBody,
        summary="Staff: hand a gateway session to another reviewer of its domain",
    ),
}


def run(user: User, session_id: int, name: object, body: dict[str, Any]) -> dict[str, Any]:
    """Validate a client's command body and hand it to services; raises CommandError."""
    command = COMMANDS.get(name) if isinstance(name, str) else None
    if command is None:
        unknown = _("Unknown command %(name)s; known: %(known)s")
        raise InvalidInput(unknown % {"name": arguments.shown(name), "known": ", ".join(COMMANDS)})
    return command.func(
        user, session_id, command_id=bodies.command_id_of(body), **command.arguments(body)
    )
