"""Spec validation: every kind by name, and a validated policy from its JSON-able spec."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from inference.policies.base import SPEC_KEYS, Param, Policy, PolicyConfigError
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
        raise PolicyConfigError(f"A policy spec must be an object, not {type(spec).__name__}")
    name = spec_name(spec)
    label = f'Policy "{name}"'
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise PolicyConfigError(f"{label}: unknown field(s) {', '.join(unknown)}", name, unknown[0])
    cls = spec_kind(spec, label, name)
    label = f'Policy "{name}" ({cls.kind})'
    action = spec_action(spec, cls, label, name)
    cooldown = spec_cooldown(spec, label, name)
    if not isinstance(spec.get("enabled", True), bool):
        raise PolicyConfigError(f'{label}: "enabled" must be true or false', name, "enabled")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise PolicyConfigError(f'{label}: "description" must be text', name, "description")
    params = validate_params(spec.get("params", {}), cls, label, name)
    return cls(name, action, cooldown, params, description)


def spec_name(spec: dict[str, Any]) -> str:
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        kind = spec.get("kind", "unknown kind")
        raise PolicyConfigError(f'A policy ({kind}) needs a non-empty "name"', None, "name")
    return name.strip()


def spec_kind(spec: dict[str, Any], label: str, name: str) -> type[Policy]:
    kind = spec.get("kind")
    if kind not in POLICY_KINDS:
        known = ", ".join(POLICY_KINDS)
        raise PolicyConfigError(f"{label}: unknown kind {kind!r} (known: {known})", name, "kind")
    return POLICY_KINDS[kind]


def spec_action(spec: dict[str, Any], cls: type[Policy], label: str, name: str) -> str:
    action = spec.get("action", cls.default_action)
    if action not in cls.actions:
        allowed = " or ".join(f'"{a}"' for a in cls.actions)
        raise PolicyConfigError(f"{label}: action {action!r} must be {allowed}", name, "action")
    return str(action)


def spec_cooldown(spec: dict[str, Any], label: str, name: str) -> int:
    cooldown = spec.get("cooldown", 0)
    if not isinstance(cooldown, int) or isinstance(cooldown, bool) or cooldown < 0:
        message = f'{label}: "cooldown" must be a whole number of tokens >= 0, not {cooldown!r}'
        raise PolicyConfigError(message, name, "cooldown")
    return cooldown


def validate_params(raw: Any, cls: type[Policy], label: str, name: str) -> dict[str, Any]:
    """Params checked against the kind's schema, with defaults filled in."""
    if not isinstance(raw, dict):
        raise PolicyConfigError(f'{label}: "params" must be an object', name, "params")
    known = {param.name for param in cls.PARAMS}
    unknown = sorted(set(raw) - known)
    if unknown:
        expected = ", ".join(sorted(known)) or "none"
        message = f'{label}: unknown parameter "{unknown[0]}" (expected: {expected})'
        raise PolicyConfigError(message, name, unknown[0])
    return {param.name: check_param(param, raw, label, name) for param in cls.PARAMS}


def check_param(param: Param, raw: dict[str, Any], label: str, name: str) -> Any:
    def fail(message: str) -> PolicyConfigError:
        return PolicyConfigError(f'{label}: parameter "{param.name}" {message}', name, param.name)

    if param.name not in raw:
        if param.required:
            raise fail("is required")
        return list(param.default) if isinstance(param.default, tuple) else param.default
    value = raw[param.name]
    if value is None and param.nullable:
        return None
    problem = TYPE_CHECKS[param.type](value)
    if problem:
        raise fail(f"must be {problem}, not {value!r}")
    out_of_range = range_problem(param, value)
    if out_of_range:
        raise fail(f"must be {out_of_range}, not {value!r}")
    if param.type == "integer":
        return int(value)
    return list(value) if param.type == "string_list" else value


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


TYPE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "number": lambda v: None if is_number(v) else "a number",
    "integer": lambda v: None if is_number(v) and float(v).is_integer() else "a whole number",
    "boolean": lambda v: None if isinstance(v, bool) else "true or false",
    "string": lambda v: None if isinstance(v, str) else "a string",
    "string_list": lambda v: (
        None
        if isinstance(v, list | tuple) and v and all(isinstance(s, str) for s in v)
        else "a non-empty list of strings"
    ),
}


def range_problem(param: Param, value: Any) -> str | None:
    if param.min is not None and (value <= param.min if param.exclusive_min else value < param.min):
        return f"> {param.min}" if param.exclusive_min else f">= {param.min}"
    if param.max is not None and value > param.max:
        return f"<= {param.max}"
    return None
