"""Attention gating: which history positions a decode step attends to.

A gated step attends to the attention sinks (the first ``sinks`` positions), the recent
``window``, the anchor spans of the case text, and the ``top_k`` heavy hitters: the
positions this step's query weighs most, by the exact q·K scores over the whole context,
summed over the query heads that share a KV head. ``wide_top_k`` replaces ``top_k`` while
one of ``triggers`` occurs in the recent generated text; ``<RECALL>`` in the prompt turns
the gate off for the run.

Why exact scores rather than an accumulator (H2O) or page bounds (Quest): the selection is
then a pure function of (query, keys, tokens, config), so an interrupted gated run equals
an uninterrupted one through pause/resume, edits, rollbacks, snapshots, rebuilds and
failover with nothing new to carry, and the gate keeps no memory per position (an H2O
accumulator would have to travel in snapshots and could not be rebuilt from token ids).
The scores read the keys once; the softmax and the weighted sum of values run over the
kept positions only, gathered, so the values are read only where the gate looks.

Every context position after the prompt (generated tokens and notes) is computed gated, in
a single-token step or in a multi-token forward (an edit's tail, a note, a rebuild's
prefill): the same rule whatever path produced the position, hence the identity. The
prompt itself is prefilled with full attention.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from inference.message import Message

DEFAULT_TRIGGERS = ("history", "previously", "prior", "病史", "既往", "上次")
RECALL_MARKER = "<RECALL>"
MODES = ("full", "gated")
TRIGGER_TOKENS = 32  # the recent generated tokens whose text is searched for triggers
MAX_POSITIONS = 1 << 20  # an upper bound on sinks, window and top_k

_ANCHOR = re.compile(r"<ANCHOR:([^>]*)>|</ANCHOR>")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


class GateConfigError(ValueError):
    """An attention setting is invalid; the message names the field."""


@dataclass(frozen=True)
class AnchorSpan:
    name: str
    start: int  # [start, end): characters of the clean text, or context positions
    end: int


@dataclass(frozen=True)
class GateConfig:
    mode: str = "full"  # "full" | "gated"
    sinks: int = 4
    window: int = 64
    top_k: int = 10
    wide_top_k: int = 50
    triggers: tuple[str, ...] = DEFAULT_TRIGGERS

    def __post_init__(self) -> None:
        _require(self.mode in MODES, "mode", "must be one of %(modes)s", modes=", ".join(MODES))
        for name in ("sinks", "window", "top_k", "wide_top_k"):
            value = getattr(self, name)
            ok = isinstance(value, int) and not isinstance(value, bool)
            low = 1 if name == "window" else 0  # the newest positions are always looked at
            template = "must be an integer in [%(low)s, %(high)s]"
            _require(
                ok and low <= value <= MAX_POSITIONS, name, template, low=low, high=MAX_POSITIONS
            )
        _require(self.wide_top_k >= self.top_k, "wide_top_k", "must be >= top_k")
        words = self.triggers
        ok = isinstance(words, tuple) and all(isinstance(w, str) and w.strip() for w in words)
        _require(ok, "triggers", "must be a list of non-empty strings")

    @property
    def gated(self) -> bool:
        return self.mode == "gated"

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> GateConfig:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            template = "attention must be an object, not %(type)s"
            raise GateConfigError(Message(template, type=type(d).__name__))
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        _require(not unknown, ", ".join(map(str, unknown)), "is not an attention setting")
        values = dict(d)
        if "triggers" in values:
            words = values["triggers"]
            _require(isinstance(words, list | tuple), "triggers", "must be a list of strings")
            values["triggers"] = tuple(words)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["triggers"] = list(self.triggers)
        return out

    def top_k_for(self, recent_text: str) -> int:
        """top_k, or wide_top_k when a trigger occurs in ``recent_text``."""
        return self.wide_top_k if triggered(recent_text, self.triggers) else self.top_k


def _require(ok: bool, field: str, template: str, **values: Any) -> None:
    """Refuse, naming the field, with the message ``template`` and ``values`` make."""
    if not ok:
        problem = Message(template, **values)
        raise GateConfigError(
            Message("attention.%(field)s %(problem)s", field=field, problem=problem)
        )


def triggered(text: str, triggers: tuple[str, ...]) -> bool:
    """Whether a trigger word occurs in ``text``, case-insensitive. A Latin word must stand
    alone ("prior", not "priority"); a Chinese one is found inside others, as Chinese has no
    spaces to bound a word."""
    return any(_trigger_pattern(word).search(text) for word in triggers)


@functools.cache
def _trigger_pattern(word: str) -> re.Pattern[str]:
    before = r"(?<![A-Za-z0-9])" if word[:1].isascii() and word[:1].isalnum() else ""
    after = r"(?![A-Za-z0-9])" if word[-1:].isascii() and word[-1:].isalnum() else ""
    return re.compile(before + re.escape(word) + after, re.IGNORECASE)


def has_recall(text: str) -> bool:
    return RECALL_MARKER in text


def parse_anchors(text: str) -> tuple[str, list[AnchorSpan]]:
    """Strip ``<ANCHOR:NAME>…</ANCHOR>`` markers (and ``<RECALL>``) from ``text``: the clean
    text and each anchor's character span in it. Nested or unclosed markers, or a bad name,
    raise ValueError."""
    text = text.replace(RECALL_MARKER, "")
    clean: list[str] = []
    spans: list[AnchorSpan] = []
    at, length = 0, 0  # read position in ``text``, length of the clean text so far
    open_name: str | None = None
    open_start = 0
    for match in _ANCHOR.finditer(text):
        clean.append(text[at : match.start()])
        length += match.start() - at
        at = match.end()
        name = match.group(1)
        if name is not None:  # an opening marker
            if open_name is not None:
                raise ValueError(
                    f"anchor {name!r} opens inside anchor {open_name!r}: anchors do not nest"
                )
            if not _NAME.fullmatch(name):
                raise ValueError(f"anchor name {name!r} must be letters, digits, _ or -")
            open_name, open_start = name, length
        else:
            if open_name is None:
                raise ValueError("</ANCHOR> closes no open anchor")
            spans.append(AnchorSpan(open_name, open_start, length))
            open_name = None
    if open_name is not None:
        raise ValueError(f"anchor {open_name!r} is never closed (</ANCHOR> missing)")
    clean.append(text[at:])
    return "".join(clean), spans
