"""The pause budget: pauses interrupt a person, so policies may only spend a few.

A budget limits policy pauses: at most ``per_100_tokens`` in any window of 100 generated
tokens, at least ``min_distance`` tokens after any earlier pause (manual ones included, so a
policy does not stop the text again right after a resume), and, with
``hold_until_first_word``, none before the generated text holds its first word (unless the
policy's spec allows it). Of several policies that want to pause at one step the one with the
highest priority pauses. Every refused pause is kept as a flag whose reason says why, so
nothing a policy noticed is lost. Manual pauses and ``pause_at`` are never limited.

``PauseLedger`` remembers where pauses happened; it is part of the policy set's state, so a
resumed, restored or rebuilt session keeps counting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import regex

from inference.message import Message
from inference.policies.base import Decision, PolicyConfigError

WINDOW_TOKENS = 100  # the budget's rate counts pauses per this many generated tokens
MAX_REMEMBERED_PAUSES = 256  # older pauses are far outside the window and the distance
FIRST_WORD = regex.compile(r"\w")  # a letter, digit or CJK character: the first word began


@dataclass(frozen=True)
class PauseBudget:
    """How many policy pauses a session may have; zeros and False mean no limit."""

    per_100_tokens: int = 0  # at most this many policy pauses per 100 generated tokens
    min_distance: int = 0  # tokens between any two pauses
    hold_until_first_word: bool = False  # no policy pause before the first generated word

    def __post_init__(self) -> None:
        for name in ("per_100_tokens", "min_distance"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                template = 'Pause budget: "%(field)s" must be a whole number >= 0, not %(value)r'
                message = Message(template, field=name, value=value)
                raise PolicyConfigError(message, None, name)
        if not isinstance(self.hold_until_first_word, bool):
            template = 'Pause budget: "hold_until_first_word" must be true or false, not %(value)r'
            message = Message(template, value=self.hold_until_first_word)
            raise PolicyConfigError(message, None, "hold_until_first_word")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PauseBudget:
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise PolicyConfigError(Message("A pause budget must be an object"))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            unknown_field = Message('Pause budget: unknown field "%(field)s"', field=unknown[0])
            raise PolicyConfigError(unknown_field, None, unknown[0])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class LedgerEntry(NamedTuple):
    """One pause: generated tokens when it happened, and whether a policy made it."""

    position: int
    policy: bool


class PauseLedger:
    """Where this session paused, for the budget's rate and distance."""

    def __init__(self, entries: Sequence[LedgerEntry] = ()) -> None:
        self.entries = list(entries)

    def note(self, position: int, policy: bool) -> None:
        self.entries = [*self.entries, LedgerEntry(position, policy)][-MAX_REMEMBERED_PAUSES:]

    def truncate(self, position: int) -> None:
        """An edit or a rollback cut the text at ``position``: pauses after it happened all the
        same (a person was interrupted), so they count as if made at the cut."""
        self.entries = [LedgerEntry(min(e.position, position), e.policy) for e in self.entries]

    def last(self) -> int | None:
        return max((e.position for e in self.entries), default=None)

    def policy_pauses_since(self, position: int) -> int:
        return sum(1 for e in self.entries if e.policy and e.position > position)

    def to_list(self) -> list[list[int]]:
        return [[e.position, int(e.policy)] for e in self.entries]

    @classmethod
    def from_list(cls, data: Sequence[Sequence[int]]) -> PauseLedger:
        return cls([LedgerEntry(int(p), bool(k)) for p, k in data])


def refusal(budget: PauseBudget, ledger: PauseLedger, position: int) -> str | None:
    """Why the budget refuses a policy pause when ``position`` tokens exist; None if it may."""
    last = ledger.last()
    if budget.min_distance and last is not None and position - last < budget.min_distance:
        return (
            f"{position - last} tokens after the last pause; the budget asks for"
            f" {budget.min_distance}"
        )
    if budget.per_100_tokens:
        spent = ledger.policy_pauses_since(position - WINDOW_TOKENS)
        if spent >= budget.per_100_tokens:
            return f"{spent} pauses in the last {WINDOW_TOKENS} tokens already, the budget's limit"
    return None


def before_first_word(text: str) -> bool:
    return FIRST_WORD.search(text) is None


def as_flag(decision: Decision, rule: str, why: str) -> Decision:
    """A pause the budget or a higher priority refused, kept as a flag that says why."""
    evidence = {**decision.evidence, "budget": {"rule": rule, "detail": why}}
    reason = f"{decision.reason} (not paused: {why})"
    return dataclasses.replace(decision, action="flag", reason=reason, evidence=evidence)
