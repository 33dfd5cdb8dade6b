"""What clients may send: one typed reader per argument, shared by services, the request
bodies (reviewer/web/bodies.py), the HTTP API, the websocket and the API description.

Each reader is pydantic metadata: ``Annotated[int, POSITION]`` declares a body field, pydantic
checks it (strictly) and describes it in JSON Schema, and the refusal says, in the API's own
words, what was wrong. Services call the same reader on their own (``POSITION(value)``).

Integer fields take JSON integers only: 2.5, 3.0, true and "3" are refused, and so is any
integer outside the field's range. Numbers must be finite: JSON text holding NaN, Infinity
or a number too large for a float (1e400) is refused as a whole. Strings are bounded and
must be storable: Postgres refuses the NUL character and lone UTF-16 surrogates.

Each reader raises InvalidInput (400) with a message naming the argument, in the language
active when it refuses (a reviewer's page's; English for a client that asks for none).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, NoReturn

from django.conf import settings
from django.utils.translation import gettext as _
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from reviewer.lifecycle import task_types

MAX_INT = 2**31 - 1  # Postgres integer: positions, offsets, token ids
MAX_BIGINT = 2**63 - 1  # Postgres bigint: seeds and primary keys
MAX_COMMENT_CHARS = 10_000
MAX_COMMAND_ID_CHARS = 100  # CommandReceipt.command_id
MAX_DOMAIN_CHARS = 100  # Domain.name and Domain.slug
MAX_POLICY_NAME_CHARS = 100  # PausePolicy.name
SHOWN_CHARS = 40  # of a refused value, in the error message
REFUSED = "refused"  # the pydantic error type of a reader's refusal


class CommandError(Exception):
    """A client's request that cannot be carried out; status is the HTTP status to answer,
    code (where a client acts on the refusal) a name for it that no translation changes."""

    status = 400
    code: str | None = None


class InvalidInput(CommandError):
    status = 400


def shown(value: Any) -> str:
    """A refused value as the error message quotes it: short, whatever was sent."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def refuse(message: str) -> NoReturn:
    """Inside a pydantic check: fail with this message, as the client reads it."""
    raise PydanticCustomError(REFUSED, "{message}", {"message": message})


@dataclass(frozen=True)
class Reader:
    """One argument: pydantic's own check (``inner``), refusals in the API's words
    (``refusal``, ``read``) and its JSON Schema, with the description."""

    name: str

    def inner(self) -> CoreSchema:
        raise NotImplementedError

    def refusal(self, value: Any) -> str:
        raise NotImplementedError

    def read(self, value: Any) -> Any:
        """What pydantic's check passed, checked further; refuse() what it may not hold."""
        return value

    def _checked(self, value: Any, check: core_schema.ValidatorFunctionWrapHandler) -> Any:
        try:
            return self.read(check(value))
        except ValidationError:
            refuse(self.refusal(value))

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._checked, self.inner())

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        described = handler(schema)
        description = getattr(self, "description", "")
        return {**described, "description": description} if description else described

    @cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(Annotated[Any, self])

    def __call__(self, value: Any) -> Any:
        """Read one argument outside a body (services, the websocket's sync)."""
        try:
            return self._adapter.validate_python(value)
        except ValidationError as exc:
            raise InvalidInput(str(exc.errors()[0]["msg"])) from None

    def schema(self) -> dict[str, Any]:
        return dict(self._adapter.json_schema())


@dataclass(frozen=True)
class Integer(Reader):
    minimum: int = 0
    maximum: int = MAX_INT
    description: str = ""

    def inner(self) -> CoreSchema:
        # Strict: bool is an int in Python, but JSON true is not an integer; nor is 3.0.
        return core_schema.int_schema(strict=True, ge=self.minimum, le=self.maximum)

    def refusal(self, value: Any) -> str:
        return _(
            "%(name)s must be a JSON integer from %(minimum)s to %(maximum)s, not %(value)s"
        ) % {
            "name": self.name,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "value": shown(value),
        }

    def __call__(self, value: Any) -> int:
        return int(super().__call__(value))


@dataclass(frozen=True)
class Text(Reader):
    max_chars: int = 0  # or, when limit_setting names one, that setting's value
    limit_setting: str = ""
    blank: bool = False  # may be empty (or only spaces)
    strip: bool = False  # leading and trailing spaces are dropped
    description: str = ""

    @property
    def limit(self) -> int:
        return getattr(settings, self.limit_setting) if self.limit_setting else self.max_chars

    def inner(self) -> CoreSchema:
        # The rest is read(): a setting may change the limit after the models are built, and
        # pydantic's own stripping would refuse a lone surrogate as "not a string".
        return core_schema.str_schema(strict=True)

    def refusal(self, value: Any) -> str:
        return _("%(name)s must be a string, not %(value)s") % {
            "name": self.name,
            "value": shown(value),
        }

    def read(self, value: str) -> str:
        if self.strip:
            value = value.strip()
        name = {"name": self.name}
        if not self.blank and not value.strip():
            refuse(_("%(name)s must not be empty") % name)
        if len(value) > self.limit:
            too_long = _("%(name)s is %(length)s characters long; the limit is %(limit)s")
            refuse(too_long % {**name, "length": len(value), "limit": self.limit})
        if "\x00" in value:
            refuse(_("%(name)s must not contain the NUL character") % name)
        if not encodable(value):
            refuse(_("%(name)s must be valid Unicode (it holds a lone surrogate)") % name)
        return value

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        described = {**super().__get_pydantic_json_schema__(schema, handler)}
        described["maxLength"] = self.limit  # read now: the configured limit
        if not self.blank:
            described["minLength"] = 1
        return described

    def __call__(self, value: Any) -> str:
        return str(super().__call__(value))


@dataclass(frozen=True)
class Choice(Reader):
    choices: Sequence[str] = ()
    description: str = ""

    def inner(self) -> CoreSchema:
        return core_schema.literal_schema(list(self.choices))

    def refusal(self, value: Any) -> str:
        return _("%(name)s must be one of %(choices)s, not %(value)s") % {
            "name": self.name,
            "choices": ", ".join(self.choices),
            "value": shown(value),
        }

    def __call__(self, value: Any) -> str:
        return str(super().__call__(value))


def encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable(text: str) -> bool:
    """Postgres stores neither the NUL character nor a lone UTF-16 surrogate."""
    return "\x00" not in text and encodable(text)


# --- the arguments --------------------------------------------------------------------------

SEED = Integer("seed", 0, MAX_BIGINT, "Same seed, same text; a random one when absent")
MAX_NEW_TOKENS = Integer(
    "max_new_tokens",
    1,
    MAX_INT,
    "Tokens the model may generate; prompt plus this must fit the model's context",
)
DOMAIN = Text("domain", MAX_DOMAIN_CHARS, description="The domain's name or slug")
INPUT = Text(
    "input",
    limit_setting="CAESURA_MAX_INPUT_CHARS",
    strip=True,
    description="The case text; its prompt plus max_new_tokens must fit the model's context",
)
TASK_TYPE = Choice(
    "task_type",
    task_types.LABELS,
    "Decides the decoding preset; classified from the input when absent",
)
CORRECTED_TASK_TYPE = Choice(
    "task_type", task_types.LABELS, "The task type the reviewer says the input is"
)
COMMAND_ID = Text(
    "command_id",
    MAX_COMMAND_ID_CHARS,
    blank=True,
    description="Client-chosen id: a repeat answers with the first result and changes nothing",
)
START = Integer("start", description="First character of the span (Unicode code points)")
END = Integer("end", description="One past the span's last character (code points)")
EDIT_TEXT = Text(
    "text",
    limit_setting="CAESURA_MAX_EDIT_CHARS",
    blank=True,
    description="Replacement text; the edited session must still fit the model's context",
)
GLOSSARY_TERM = Integer("glossary_term", 1, MAX_BIGINT, "Id of the glossary term used")
POSITION = Integer("position", description="Generated tokens to keep")
SEEN_LENGTH = Integer(
    "seen_length",
    description="The length of the text the client acted on (code points): when it is not the"
    " session's any more, the command is refused (409, code text_changed), never applied elsewhere",
)
SEEN = Text(
    "seen",
    MAX_INT,
    blank=True,
    description="The span's text as the client saw it: when it is not there any more, the edit"
    " is refused (409, code text_changed)",
)
TOKEN_ID = Integer("token_id", description="One of the alternatives offered at the pause")
LAYER = Integer("layer", description="Layer whose heads to show")
COMMENT = Text("comment", MAX_COMMENT_CHARS, blank=True, description="The reviewer's comment")
POLICY = Text(
    "policy", MAX_POLICY_NAME_CHARS, description="The name of one of the session's policies"
)
REVIEWER = Text("reviewer", 150, strip=True, description="The username of a reviewer of the domain")
AFTER = Integer("after", description="Sequence number of the last event the client has")
LIMIT = Integer("limit", 0, MAX_INT, "Most sessions to list (at most 1000 are sent)")


# --- JSON and query strings -------------------------------------------------------------------


def loads(text: str | bytes, what: str | None = None) -> Any:
    """Strict JSON: no NaN or Infinity, no number beyond a float, no nesting deeper than
    Python's parser follows, no key twice in an object (parsers differ on which one counts,
    so a proxy or a log could read another command than the one run). Anything else is
    refused with InvalidInput naming `what` (by default the request body)."""
    named = {"what": what or _("Request body")}

    def refuse_constant(name: str) -> NoReturn:
        message = _("%(what)s is not valid JSON: %(name)s is not a JSON number")
        raise InvalidInput(message % {**named, "name": name})

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            message = _("%(what)s holds a number out of range: %(value)s")
            raise InvalidInput(message % {**named, "value": shown(text)})
        return value

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                message = _("%(what)s is not valid JSON here: the key %(key)s appears twice")
                raise InvalidInput(message % {**named, "key": shown(key)})
            found[key] = value
        return found

    try:
        return json.loads(
            text, parse_constant=refuse_constant, parse_float=finite, object_pairs_hook=unique_keys
        )
    except RecursionError:
        message = _("%(what)s is not valid JSON: it is nested too deeply")
        raise InvalidInput(message % named) from None
    except UnicodeDecodeError:
        raise InvalidInput(_("%(what)s is not valid JSON: it is not UTF-8") % named) from None
    except ValueError:  # also integers with more digits than Python converts
        raise InvalidInput(_("%(what)s is not valid JSON") % named) from None


def query_integer(raw: str | None, reader: Integer, default: int) -> int:
    """A query-string integer: decimal digits, in the reader's range."""
    if raw in (None, ""):
        return default
    digits = raw.isascii() and raw.isdigit() and len(raw) <= 20
    if not digits or not reader.minimum <= int(raw) <= reader.maximum:  # said as a query's
        message = _("%(name)s must be an integer from %(minimum)s to %(maximum)s, not %(value)s")
        raise InvalidInput(
            message
            % {
                "name": reader.name,
                "minimum": reader.minimum,
                "maximum": reader.maximum,
                "value": shown(raw),
            }
        )
    return reader(int(raw))
