"""Attention gating: which history positions a decode step looks at, as a validated config, and
the anchor markup of a prompt (``<ANCHOR:NAME>…</ANCHOR>`` spans always in view, ``<RECALL>``
for full attention)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

DEFAULT_TRIGGERS = ("history", "previously", "prior", "病史", "既往", "上次")
RECALL_MARKER = "<RECALL>"
MODES = ("full", "gated")

_OPEN = re.compile(r"<ANCHOR:([A-Za-z0-9_-]+)>")
_CLOSE = "</ANCHOR>"
_MARKUP = re.compile(r"<ANCHOR:[A-Za-z0-9_-]+>|</ANCHOR>|<ANCHOR\b[^>]*>?")
_LIMITS = {"sinks": (0, 64), "window": (1, 4096), "top_k": (0, 4096), "wide_top_k": (0, 4096)}


class GateConfigError(ValueError):
    """A gate setting is wrong; the message names the field."""


class AnchorSpan(NamedTuple):
    name: str
    start: int  # characters of the clean text
    end: int


@dataclass(frozen=True)
class GateConfig:
    """Full attention, or the gate: sinks + a recent window + top-k heavy hitters + anchors;
    a trigger word in the recent text widens top-k to wide_top_k."""

    mode: str = "full"
    sinks: int = 4
    window: int = 64
    top_k: int = 10
    wide_top_k: int = 50
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise GateConfigError(f"attention.mode must be one of {', '.join(MODES)}")
        for name, (low, high) in _LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise GateConfigError(f"attention.{name} must be an integer")
            if not low <= value <= high:
                raise GateConfigError(f"attention.{name} must be in [{low}, {high}]")
        if self.wide_top_k < self.top_k:
            raise GateConfigError("attention.wide_top_k must be >= attention.top_k")
        if not isinstance(self.triggers, tuple) or not all(
            isinstance(word, str) and word.strip() for word in self.triggers
        ):
            raise GateConfigError("attention.triggers must be a list of non-empty words")

    @property
    def gated(self) -> bool:
        return self.mode == "gated"

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> GateConfig:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise GateConfigError("attention must be an object")
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise GateConfigError(f"unknown attention setting(s): {', '.join(unknown)}")
        values = dict(d)
        if "triggers" in values:
            if not isinstance(values["triggers"], list | tuple):
                raise GateConfigError("attention.triggers must be a list of non-empty words")
            values["triggers"] = tuple(values["triggers"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "triggers": list(self.triggers)}


def parse_anchors(text: str) -> tuple[str, list[AnchorSpan]]:
    """The text without its markup, and the anchors' spans in it. Nested or unclosed anchors
    raise ValueError; ``<RECALL>`` is removed too (the caller reads it from the raw text)."""
    text = text.replace(RECALL_MARKER, "")
    clean: list[str] = []
    anchors: list[AnchorSpan] = []
    at, length, open_name, open_start = 0, 0, "", -1
    for match in _MARKUP.finditer(text):
        clean.append(text[at : match.start()])
        length += match.start() - at
        at = match.end()
        opening = _OPEN.fullmatch(match.group())
        if match.group() == _CLOSE:
            if open_start < 0:
                raise ValueError(f"</ANCHOR> at character {match.start()} closes no anchor")
            anchors.append(AnchorSpan(open_name, open_start, length))
            open_start = -1
        elif opening is None:
            raise ValueError(
                f"bad anchor marker {match.group()!r}: write <ANCHOR:NAME> with NAME of letters,"
                " digits, _ or -"
            )
        elif open_start >= 0:
            raise ValueError(f"anchor {opening.group(1)!r} is nested inside {open_name!r}")
        else:
            open_name, open_start = opening.group(1), length
    if open_start >= 0:
        raise ValueError(f"anchor {open_name!r} is not closed with </ANCHOR>")
    clean.append(text[at:])
    return "".join(clean), anchors
