"""Spec validation: every kind by name, and a validated policy from its JSON-able spec."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from inference.message import Message, either
from inference.policies.base import (
    SPEC_KEYS,
    Param,
    Policy,
    PolicyConfigError,
    param_error,
    policy_label,
)
from inference.policies.learned import LearnedPolicy
from inference.policies.sentence_count import SentenceCountPolicy
from inference.policies.signal_based import (
    DriftPolicy,
    HighEntropyPolicy,
    LowConfidencePolicy,
    OverconfidencePolicy,
)
from inference.policies.text import KeywordPolicy, RegexPolicy
from inference.policies.tool_call import ToolCallPolicy

POLICY_KINDS: dict[str, type[Policy]] = {
    cls.kind: cls
    for cls in (
        KeywordPolicy,
        RegexPolicy,
        LowConfidencePolicy,
        HighEntropyPolicy,
        OverconfidencePolicy,
        SentenceCountPolicy,
        ToolCallPolicy,
        DriftPolicy,
        LearnedPolicy,
    )
}


def build_policy(spec: dict[str, Any]) -> Policy:
    """A validated policy from its JSON-able spec; PolicyConfigError says what is wrong."""
    if not isinstance(spec, dict):
        template = "A policy spec must be an object, not %(type)s"
        raise PolicyConfigError(Message(template, type=type(spec).__name__))
    name = spec_name(spec)
    label = policy_label(name)
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        fields = Message(
            "%(label)s: unknown field(s) %(fields)s", label=label, fields=", ".join(unknown)
        )
        raise PolicyConfigError(fields, name, unknown[0])
    cls = spec_kind(spec, label, name)
    label = policy_label(name, cls.kind)
    action = spec_action(spec, cls, label, name)
    cooldown = spec_cooldown(spec, label, name)
    if not isinstance(spec.get("enabled", True), bool):
        enabled = Message('%(label)s: "enabled" must be true or false', label=label)
        raise PolicyConfigError(enabled, name, "enabled")
    description = spec.get("description", "")
    if not isinstance(description, str):
        not_text = Message('%(label)s: "description" must be text', label=label)
        raise PolicyConfigError(not_text, name, "description")
    params = validate_params(spec.get("params", {}), cls, label, name)
    priority = spec_priority(spec, label, name)
    early = spec.get("may_pause_before_first_word", False)
    if not isinstance(early, bool):
        message = Message(
            '%(label)s: "may_pause_before_first_word" must be true or false', label=label
        )
        raise PolicyConfigError(message, name, "may_pause_before_first_word")
    return cls(name, action, cooldown, params, description, priority, early)


def spec_name(spec: dict[str, Any]) -> str:
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        kind = spec.get("kind", Message("unknown kind"))
        nameless = Message('A policy (%(kind)s) needs a non-empty "name"', kind=kind)
        raise PolicyConfigError(nameless, None, "name")
    return name.strip()


def spec_kind(spec: dict[str, Any], label: str, name: str) -> type[Policy]:
    kind = spec.get("kind")
    if kind not in POLICY_KINDS:
        template = "%(label)s: unknown kind %(kind)r (known: %(known)s)"
        unknown = Message(template, label=label, kind=kind, known=", ".join(POLICY_KINDS))
        raise PolicyConfigError(unknown, name, "kind")
    return POLICY_KINDS[kind]


def spec_action(spec: dict[str, Any], cls: type[Policy], label: str, name: str) -> str:
    action = spec.get("action", cls.default_action)
    if action not in cls.actions:
        allowed = either(list(cls.actions))
        wrong = Message(
            "%(label)s: action %(action)r must be %(allowed)s",
            label=label,
            action=action,
            allowed=allowed,
        )
        raise PolicyConfigError(wrong, name, "action")
    return str(action)


def spec_cooldown(spec: dict[str, Any], label: str, name: str) -> int:
    cooldown = spec.get("cooldown", 0)
    if not isinstance(cooldown, int) or isinstance(cooldown, bool) or cooldown < 0:
        template = '%(label)s: "cooldown" must be a whole number of tokens >= 0, not %(value)r'
        message = Message(template, label=label, value=cooldown)
        raise PolicyConfigError(message, name, "cooldown")
    return cooldown


def spec_priority(spec: dict[str, Any], label: str, name: str) -> int:
    priority = spec.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 10**6:
        template = '%(label)s: "priority" must be a whole number (-1000000..1000000), not %(value)r'
        message = Message(template, label=label, value=priority)
        raise PolicyConfigError(message, name, "priority")
    return priority


def validate_params(raw: Any, cls: type[Policy], label: str, name: str) -> dict[str, Any]:
    """Params checked against the kind's schema, with defaults filled in."""
    if not isinstance(raw, dict):
        not_object = Message('%(label)s: "params" must be an object', label=label)
        raise PolicyConfigError(not_object, name, "params")
    known = {param.name for param in cls.PARAMS}
    unknown = sorted(set(raw) - known)
    if unknown:
        expected = ", ".join(sorted(known)) or Message("none")
        template = '%(label)s: unknown parameter "%(param)s" (expected: %(expected)s)'
        message = Message(template, label=label, param=unknown[0], expected=expected)
        raise PolicyConfigError(message, name, unknown[0])
    return {param.name: check_param(param, raw, label, name) for param in cls.PARAMS}


def check_param(param: Param, raw: dict[str, Any], label: str, name: str) -> Any:
    def fail(message: str) -> PolicyConfigError:
        return param_error(label, name, param.name, message)

    if param.name not in raw:
        if param.required:
            raise fail(Message("is required"))
        return list(param.default) if isinstance(param.default, tuple) else param.default
    value = raw[param.name]
    if value is None and param.nullable:
        return None
    problem = TYPE_CHECKS[param.type](value) or range_problem(param, value)
    if problem:
        raise fail(Message("must be %(expected)s, not %(value)r", expected=problem, value=value))
    if param.type == "integer":
        return int(value)
    return list(value) if param.type == "string_list" else value


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


TYPE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "number": lambda v: None if is_number(v) else Message("a number"),
    "integer": lambda v: (
        None if is_number(v) and float(v).is_integer() else Message("a whole number")
    ),
    "boolean": lambda v: None if isinstance(v, bool) else Message("true or false"),
    "string": lambda v: None if isinstance(v, str) else Message("a string"),
    "string_list": lambda v: (
        None
        if isinstance(v, list | tuple) and v and all(isinstance(s, str) for s in v)
        else Message("a non-empty list of strings")
    ),
}


def range_problem(param: Param, value: Any) -> str | None:
    if param.min is not None and (value <= param.min if param.exclusive_min else value < param.min):
        return f"> {param.min}" if param.exclusive_min else f">= {param.min}"
    if param.max is not None and value > param.max:
        return f"<= {param.max}"
    return None
