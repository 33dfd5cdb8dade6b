"""Reviewer commands as clients send them: one table shared by the HTTP API, the websocket
and the API description. Services read and check each argument (reviewer/web/arguments.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reviewer import lifecycle
from reviewer.lifecycle.idempotency import Service
from reviewer.web import arguments
from reviewer.web.arguments import (
    COMMENT,
    CORRECTED_TASK_TYPE,
    EDIT_TEXT,
    END,
    GLOSSARY_TERM,
    LAYER,
    POLICY,
    POSITION,
    REVIEWER,
    START,
    TOKEN_ID,
    InvalidInput,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Reader = arguments.Integer | arguments.Text | arguments.Choice


@dataclass(frozen=True)
class Command:
    func: Service
    required: tuple[Reader, ...] = ()  # argument readers (reviewer/web/arguments.py)
    optional: tuple[Reader, ...] = ()
    status: int = 200  # 202 where a worker applies the change after the reply
    summary: str = ""

    def arguments(self, body: dict[str, Any]) -> dict[str, Any]:
        """The arguments the body gives; other keys are ignored, null counts as absent."""
        missing = [arg.name for arg in self.required if body.get(arg.name) is None]
        if missing:
            raise InvalidInput(f"{', '.join(missing)} is required")
        given = (arg.name for arg in self.required + self.optional)
        return {name: body[name] for name in given if body.get(name) is not None}


COMMANDS: dict[str, Command] = {
    "pause": Command(lifecycle.pause, summary="Ask the worker to pause at the next token"),
    "resume": Command(lifecycle.resume, summary="Continue a paused session"),
    "rollback": Command(
        lifecycle.rollback,
        required=(POSITION,),
        status=202,
        summary="Drop the generated tokens from a position on",
    ),
    "edit": Command(
        lifecycle.edit,
        required=(START, END, EDIT_TEXT),
        optional=(GLOSSARY_TERM,),
        status=202,
        summary="Replace a span of the generated text",
    ),
    "choose": Command(
        lifecycle.choose,
        required=(TOKEN_ID,),
        status=202,
        summary="Make an offered alternative the next token",
    ),
    "approve": Command(lifecycle.approve, optional=(COMMENT,), summary="Accept the text"),
    "reject": Command(lifecycle.reject, required=(COMMENT,), summary="Refuse the text"),
    "cancel": Command(lifecycle.cancel, summary="Stop the session for good"),
    "attention": Command(
        lifecycle.attention,
        required=(LAYER,),
        status=202,
        summary="Ask for one layer's attention per head at the pause",
    ),
    "mute": Command(
        lifecycle.mute,
        required=(POLICY,),
        summary="At a pause: silence one policy for the rest of the session",
    ),
    "unmute": Command(
        lifecycle.unmute,
        required=(POLICY,),
        summary="At a pause: let a muted policy fire again",
    ),
    "correct_task": Command(
        lifecycle.correct_task,
        required=(CORRECTED_TASK_TYPE,),
        summary="Say which task type the input is (audited; for the classifier's accuracy)",
    ),
    "claim": Command(
        lifecycle.claim, summary="Take a waiting gateway session from the domain's queue"
    ),
    "release": Command(lifecycle.release, summary="Give a claimed session back to the queue"),
    "reassign": Command(
        lifecycle.reassign,
        required=(REVIEWER,),
        summary="Staff: hand a gateway session to another reviewer of its domain",
    ),
}


def command_id_of(body: dict[str, Any]) -> str | None:
    value = body.get("command_id")
    if value is None:
        return None
    return arguments.COMMAND_ID(value) or None


def run(user: User, session_id: int, name: object, body: dict[str, Any]) -> dict[str, Any]:
    """Validate a client's command body and hand it to services; raises CommandError."""
    command = COMMANDS.get(name) if isinstance(name, str) else None
    if command is None:
        raise InvalidInput(f"Unknown command {arguments.shown(name)}; known: {', '.join(COMMANDS)}")
    return command.func(user, session_id, command_id=command_id_of(body), **command.arguments(body))
