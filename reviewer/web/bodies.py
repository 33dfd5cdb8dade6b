"""The JSON API's request bodies, declared once as pydantic models: they check what a client
sends (each field through its reader in reviewer/web/arguments.py) and feed the API
description (reviewer/web/openapi.py). Other keys are ignored and null counts as absent, as
the API has always taken them."""

from __future__ import annotations

from typing import Annotated, Any

from django.utils.translation import gettext as _
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from inference.config import MAX_SCALE, MAX_TOP_K, MIN_SCALE
from reviewer.lifecycle import gate
from reviewer.web import arguments as a
from reviewer.web.arguments import InvalidInput


def an_object(name: str, value: Any) -> Any:
    """A JSON object, or null (absent); anything else refused in the API's words."""
    if value is not None and not isinstance(value, dict):
        a.refuse(f"{name} must be an object")
    return value


class Decoding(BaseModel):
    """Overrides of the domain's and the task type's decoding: the fields of SamplingParams
    (inference/config.py), which checks the values again (a test keeps the two alike)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    temperature: float | None = Field(
        None, ge=0, le=MAX_SCALE, description=f"0 is greedy; otherwise at least {MIN_SCALE}"
    )
    top_k: int | None = Field(None, ge=0, le=MAX_TOP_K, description="0 turns it off")
    top_p: float | None = Field(None, ge=MIN_SCALE, le=1, description="1 turns it off")
    repetition_penalty: float | None = Field(
        None, ge=MIN_SCALE, le=MAX_SCALE, description="1 turns it off"
    )
    seed: int | None = Field(None, ge=0, le=a.MAX_BIGINT, description="The top-level seed wins")
    max_new_tokens: int | None = Field(
        None, ge=1, le=a.MAX_INT, description="The top-level max_new_tokens wins"
    )
    top_alternatives: int | None = Field(
        None, ge=1, le=50, description="Alternatives reported per token"
    )
    attention: Annotated[dict[str, Any], WithJsonSchema(gate.schema())] | None = None

    @field_validator("attention", mode="before")
    @classmethod
    def gate_is_an_object(cls, value: Any) -> Any:
        return an_object("attention", value)


class CommandBody(BaseModel):
    """What every command takes: an optional command id that makes a repeat harmless."""

    model_config = ConfigDict(
        extra="ignore", json_schema_extra={"description": "Other keys are ignored; null is absent"}
    )

    command_id: Annotated[str, a.COMMAND_ID] | None = None

    @classmethod
    def argument_names(cls) -> tuple[list[str], list[str]]:
        """The required and the optional arguments, as declared, without the command id."""
        names = [name for name in cls.model_fields if name != "command_id"]
        required = [name for name in names if cls.model_fields[name].is_required()]
        return required, [name for name in names if name not in required]


class StartBody(CommandBody):
    domain: Annotated[str, a.DOMAIN]
    input: Annotated[str, a.INPUT]
    seed: Annotated[int, a.SEED] | None = None
    max_new_tokens: Annotated[int, a.MAX_NEW_TOKENS] | None = None
    task_type: Annotated[str, a.TASK_TYPE] | None = None
    decoding: Decoding | None = None

    @field_validator("task_type", mode="before")
    @classmethod
    def empty_is_absent(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("decoding", mode="before")
    @classmethod
    def decoding_is_an_object(cls, value: Any) -> Any:
        return an_object("decoding", value)


class RollbackBody(CommandBody):
    position: Annotated[int, a.POSITION]
    seen_length: Annotated[int, a.SEEN_LENGTH] | None = None


class EditBody(CommandBody):
    start: Annotated[int, a.START]
    end: Annotated[int, a.END]
    text: Annotated[str, a.EDIT_TEXT]
    glossary_term: Annotated[int, a.GLOSSARY_TERM] | None = None
    seen_length: Annotated[int, a.SEEN_LENGTH] | None = None
    seen: Annotated[str, a.SEEN] | None = None


class ChooseBody(CommandBody):
    token_id: Annotated[int, a.TOKEN_ID]
    seen_length: Annotated[int, a.SEEN_LENGTH] | None = None


class ApproveBody(CommandBody):
    comment: Annotated[str, a.COMMENT] | None = None


class RejectBody(CommandBody):
    comment: Annotated[str, a.COMMENT]


class AttentionBody(CommandBody):
    layer: Annotated[int, a.LAYER]


class PolicyBody(CommandBody):
    policy: Annotated[str, a.POLICY]


class CorrectTaskBody(CommandBody):
    task_type: Annotated[str, a.CORRECTED_TASK_TYPE]


class ReassignBody(CommandBody):
    reviewer: Annotated[str, a.REVIEWER]


MODELS: tuple[type[CommandBody], ...] = (
    CommandBody,
    StartBody,
    RollbackBody,
    EditBody,
    ChooseBody,
    ApproveBody,
    RejectBody,
    AttentionBody,
    PolicyBody,
    CorrectTaskBody,
    ReassignBody,
)


def read(model: type[CommandBody], data: dict[str, Any]) -> dict[str, Any]:
    """The body's arguments, checked, without the command id: what services take."""
    given = {key: value for key, value in data.items() if value is not None}
    try:
        body = model.model_validate(given)
    except ValidationError as exc:
        raise InvalidInput(refusal(exc)) from None
    return body.model_dump(exclude_none=True, exclude={"command_id"})


def command_id_of(data: dict[str, Any]) -> str | None:
    """The command id alone (an empty one counts as absent), before anything else is read."""
    value = data.get("command_id")
    if value is None:
        return None
    return a.COMMAND_ID(value) or None


def refusal(exc: ValidationError) -> str:
    """Every missing field at once, else the first refusal in the API's words."""
    errors = exc.errors()
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
    if missing:
        return _("%(fields)s is required") % {"fields": ", ".join(missing)}
    first = errors[0]
    if first["type"] == a.REFUSED:
        return str(first["msg"])
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])
