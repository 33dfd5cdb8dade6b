"""Value types every policy kind shares: the spec error, a step, a decision, a
parameter and the Policy base class with its firing memory per span."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import regex

from inference.message import Message
from inference.signals import Signals

SPEC_KEYS = frozenset(
    {
        "name",
        "kind",
        "action",
        "params",
        "cooldown",
        "enabled",
        "description",
        "priority",
        "may_pause_before_first_word",
    }
)
DEFAULT_ABSOLUTE_WORDS = (
    "definitely",
    "certainly",
    "100%",
    "guaranteed",
    "without doubt",
    "毫无疑问",
    "绝对",
    "百分之百",
)
PHRASE_SLACK_CHARS = 64  # extra whitespace a multi-word keyword may span, plus its boundary
MAX_REMEMBERED_FIRINGS = 64  # per policy; older spans are far outside any text window
_REQUIRED = object()
CJK_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
WORD_CHAR = regex.compile(rf"[^\W{CJK_SCRIPTS}]")  # letters that need word boundaries; not CJK


class PolicyConfigError(ValueError):
    """A policy spec is invalid; the message (a Message, inference/message.py, which the web
    layer translates) names the policy and the parameter."""

    def __init__(self, message: str, policy: str | None = None, field: str | None = None):
        super().__init__(message)
        self.policy = policy
        self.field = field


def policy_label(name: str, kind: str | None = None) -> Message:
    """How a message names a policy: by its name, and its kind once known."""
    if kind is None:
        return Message('Policy "%(name)s"', name=name)
    return Message('Policy "%(name)s" (%(kind)s)', name=name, kind=kind)


def param_error(label: str, name: str, param: str, problem: str) -> PolicyConfigError:
    """What is wrong with one parameter of the policy ``label`` names."""
    message = Message(
        '%(label)s: parameter "%(param)s" %(problem)s', label=label, param=param, problem=problem
    )
    return PolicyConfigError(message, name, param)


@dataclass(frozen=True)
class StepContext:
    phase: str  # "before_token" | "after_token"
    position: int  # index into generated ids (see the engine contract)
    signals: Signals
    text: str  # generated text so far (after_token: includes the new token's text)
    new_text_start: int  # after_token: offset in `text` where the newest token's text starts
    top1_history: Sequence[float]  # one per generated token, index = position
    entropy_history: Sequence[float]
    similarity_history: Sequence[float | None]  # cosine(token hidden, mean prompt hidden)


@dataclass(frozen=True)
class Decision:
    policy: str
    kind: str
    action: str  # "pause" | "rollback" | "flag"
    reason: str
    evidence: dict[str, Any]
    span: tuple[int, int] | None = None  # offsets into ctx.text of the matched text
    rollback_to: int | None = None  # keep generated ids[:rollback_to] and resample

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"] = list(self.span) if self.span is not None else None
        return data


def manual_decision(reason: str, position: int) -> Decision:
    """The synthetic decision behind a pause asked for from outside (not a policy)."""
    return Decision(
        policy="manual",
        kind="manual",
        action="pause",
        reason=f"Paused: {reason}",
        evidence={"source": "control", "requested": reason, "position": position},
    )


@dataclass(frozen=True)
class Param:
    """One parameter of a policy kind: how to validate it and how an admin form shows it."""

    name: str
    type: str  # "number" | "integer" | "boolean" | "string" | "string_list"
    help: str
    default: Any = _REQUIRED
    min: float | None = None
    max: float | None = None
    exclusive_min: bool = False
    nullable: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def to_dict(self) -> dict[str, Any]:
        data = {"type": self.type, "help": self.help, "required": self.required}
        if not self.required:
            data["default"] = (
                list(self.default) if isinstance(self.default, tuple) else self.default
            )
        for key in ("min", "max"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.exclusive_min:
            data["exclusive_min"] = True
        if self.nullable:
            data["nullable"] = True
        return data


class Policy:
    """Base class: one small subclass per kind, each with its PARAMS and `evaluate`."""

    kind: ClassVar[str]
    phase: ClassVar[str]
    needs_hidden_states: ClassVar[bool] = False
    text_only: ClassVar[bool] = False  # decides from text alone, so `scan_text` can run it
    actions: ClassVar[tuple[str, ...]] = ("pause", "flag")
    default_action: ClassVar[str] = "pause"
    PARAMS: ClassVar[tuple[Param, ...]] = ()

    def __init__(
        self,
        name: str,
        action: str,
        cooldown: int,
        params: dict[str, Any],
        description: str = "",
        priority: int = 0,
        may_pause_before_first_word: bool = False,
    ):
        self.name = name
        self.action = action
        self.cooldown = cooldown
        self.params = params
        self.description = description
        self.priority = priority  # of several pauses at one step, the highest pauses
        self.may_pause_before_first_word = may_pause_before_first_word  # see budget.py
        self.prepare()

    @classmethod
    def param_schema(cls) -> dict[str, Any]:
        """Parameters with types, defaults and bounds, for generating an admin form."""
        return {param.name: param.to_dict() for param in cls.PARAMS}

    def prepare(self) -> None:
        """Check parameters beyond their schema and precompute; raise config_error."""

    def evaluate(self, ctx: StepContext) -> Decision | None:
        raise NotImplementedError

    def config_error(self, field: str, message: str) -> PolicyConfigError:
        return param_error(policy_label(self.name, self.kind), self.name, field, message)

    def decide(
        self, ctx: StepContext, reason: str, evidence: dict[str, Any], **extra: Any
    ) -> Decision:
        evidence = {**evidence, "position": ctx.position, "signals": ctx.signals.to_dict()}
        return Decision(self.name, self.kind, self.action, reason, evidence, **extra)

    def to_spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "action": self.action,
            "params": json.loads(json.dumps(self.params)),
            "cooldown": self.cooldown,
            "enabled": True,
            "description": self.description,
            "priority": self.priority,
            "may_pause_before_first_word": self.may_pause_before_first_word,
        }
