"""Reviewer commands as clients send them: one table shared by the HTTP API and the websocket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reviewer import services


@dataclass(frozen=True)
class Command:
    func: Any
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    status: int = 200  # 202 where a worker applies the change after the reply

    def arguments(self, body: dict) -> dict:
        missing = [name for name in self.required if body.get(name) is None]
        if missing:
            raise services.InvalidInput(f"{', '.join(missing)} is required")
        names = self.required + tuple(name for name in self.optional if name in body)
        return {name: body[name] for name in names}


COMMANDS: dict[str, Command] = {
    "pause": Command(services.pause),
    "resume": Command(services.resume),
    "rollback": Command(services.rollback, required=("position",), status=202),
    "edit": Command(
        services.edit, required=("start", "end", "text"), optional=("glossary_term",), status=202
    ),
    "choose": Command(services.choose, required=("token_id",), status=202),
    "approve": Command(services.approve, optional=("comment",)),
    "reject": Command(services.reject, required=("comment",)),
    "cancel": Command(services.cancel),
    "attention": Command(services.attention, required=("layer",), status=202),
}


def command_id_of(body: dict) -> str | None:
    value = body.get("command_id")
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > 100:
        raise services.InvalidInput("command_id must be a string of at most 100 characters")
    return value


def run(user, session_id: int, name: str, body: dict) -> dict:
    """Validate a client's command body and hand it to services; raises CommandError."""
    command = COMMANDS.get(name)
    if command is None:
        raise services.InvalidInput(f"Unknown command {name!r}")
    return command.func(user, session_id, command_id=command_id_of(body), **command.arguments(body))
