"""Sampling parameters: a small validated dataclass built from and stored as plain JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TypeGuard

from inference.gating import GateConfig, GateConfigError
from inference.message import Message

# Decoding strategy per task type (design note: "don't let the model think too much").
MAX_TOP_K = 1 << 20  # past any vocabulary: a larger value would only mean "off"
TASK_PRESETS: dict[str, dict[str, Any]] = {
    "deterministic": {"temperature": 0.0},
    "open": {"temperature": 0.7, "top_p": 0.9, "repetition_penalty": 1.05},
    "reasoning": {"temperature": 0.5, "top_p": 0.9, "top_k": 50},
}

# Bounds of temperature, top_p and repetition_penalty (see __post_init__).
MIN_SCALE, MAX_SCALE = 0.001, 100.0

# What the circuit breaker switches to after two rollbacks in one generation.
CONSERVATIVE: dict[str, Any] = {"temperature": 0.3, "top_p": 0.85}


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is drawn. temperature 0 means greedy."""

    temperature: float = 0.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1.0: off
    repetition_penalty: float = 1.0  # 1.0: off
    seed: int = 0
    max_new_tokens: int = 256
    top_alternatives: int = 5  # k of the top-k alternatives reported per step
    attention: GateConfig = field(default_factory=GateConfig)  # full, or gated (gating.py)

    def __post_init__(self) -> None:
        if not isinstance(self.attention, GateConfig):  # a dict from JSON (or a preset)
            object.__setattr__(self, "attention", _attention(self.attention))
        # Types first: 2.5 tokens or an infinite temperature must fail here, not in torch.
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.type == "int":
                template = "%(name)s must be an integer, not %(value)s"
                _check(_is_int(value), template, name=spec.name, value=_shown(value))
            elif spec.type == "float":
                template = "%(name)s must be a finite number, not %(value)s"
                _check(_is_finite(value), template, name=spec.name, value=_shown(value))
        # Outside these ranges float32 logits overflow and the draw fails mid-generation.
        scale = {"low": MIN_SCALE, "high": MAX_SCALE}
        _check(
            self.temperature == 0 or MIN_SCALE <= self.temperature <= MAX_SCALE,
            "temperature must be 0 (greedy) or in [%(low)s, %(high)s]",
            **scale,
        )
        template = "top_k must be in [0, %(high)s] (0 turns it off)"
        _check(0 <= self.top_k <= MAX_TOP_K, template, high=MAX_TOP_K)
        _check(MIN_SCALE <= self.top_p <= 1, "top_p must be in [%(low)s, 1]", low=MIN_SCALE)
        _check(
            MIN_SCALE <= self.repetition_penalty <= MAX_SCALE,
            "repetition_penalty must be in [%(low)s, %(high)s]",
            **scale,
        )
        _check(0 <= self.seed < 2**63, "seed must be in [0, 2**63)")
        _check(self.max_new_tokens >= 1, "max_new_tokens must be >= 1")
        _check(1 <= self.top_alternatives <= 50, "top_alternatives must be in [1, 50]")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SamplingParams:
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        unknown_names = ", ".join(unknown)
        _check(not unknown, "unknown sampling parameter(s): %(names)s", names=unknown_names)
        return cls(**d)

    @classmethod
    def for_task(cls, task_type: str, **overrides: Any) -> SamplingParams:
        _check(task_type in TASK_PRESETS, "unknown task type %(task)r", task=task_type)
        return cls(**{**TASK_PRESETS[task_type], **overrides})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "attention": self.attention.to_dict()}

    def conservative(self) -> SamplingParams:
        return replace(self, **CONSERVATIVE)


class SamplingConfigError(ValueError):
    """A sampling parameter is out of range; the message names it."""


class AttentionConfigError(SamplingConfigError, GateConfigError):
    """The attention setting is invalid: caught as either kind of error."""


def _attention(value: object) -> GateConfig:
    try:
        return GateConfig.from_dict(value)  # type: ignore[arg-type]  # checked there
    except GateConfigError as exc:
        raise AttentionConfigError(*exc.args) from None  # the Message, kept


def _check(ok: bool, template: str, **values: Any) -> None:
    """Refuse with the message ``template`` and ``values`` make, unless ``ok``."""
    if not ok:
        raise SamplingConfigError(Message(template, **values))


def _is_int(value: object) -> TypeGuard[int]:
    """An integer, as JSON writes one: not 2.5, not 3.0, not true, not "3"."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    if _is_int(value):
        return abs(value) < 2**1023  # converts to a float
    return isinstance(value, float) and math.isfinite(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
