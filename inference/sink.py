"""How the decode loop reports outward. The web layer implements a Sink; the engine never
imports it. Every event has a JSON-able ``to_dict()``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from inference.policies import Decision
from inference.signals import Signals


def _decisions(decisions: Sequence[Decision]) -> list[dict[str, Any]]:
    return [d.to_dict() for d in decisions]


@dataclass(frozen=True)
class TokenEvent:
    position: int  # index into generated ids
    token_id: int
    text: str  # the text this token added (may be "" until a multi-byte char completes)
    text_offset: int  # char offset of ``text`` in the generated text
    signals: Signals  # the distribution it was drawn from, chosen_prob set
    attempt: int
    attention: list[float] | None = None  # live mode: the new token's row over the context
    similarity: float | None = None  # its hidden state's cosine to the prompt's, when computed
    gate_kept: int | None = None  # gated attention: positions each head attended to
    gate_hit_rate: float | None = None  # their share of the full attention mass (sampled)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "token",
            "position": self.position,
            "token_id": self.token_id,
            "text": self.text,
            "text_offset": self.text_offset,
            "signals": self.signals.to_dict(),
            "attempt": self.attempt,
            "attention": self.attention,
            "similarity": self.similarity,
            "gate_kept": self.gate_kept,
            "gate_hit_rate": self.gate_hit_rate,
        }


@dataclass(frozen=True)
class PauseNotice:
    """The loop stopped between two tokens for a reviewer. (The web side's record of a pause
    is the ``PauseEvent`` model; this is what the engine tells its sink.)"""

    position: int  # generated tokens so far; the next token would have this index
    phase: str  # "before_token" | "after_token" | "manual"
    reason: str
    decisions: tuple[Decision, ...] = ()  # behind the pause (one synthetic for manual)
    signals: Signals | None = None  # the next token's distribution: what the reviewer sees

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "pause",
            "position": self.position,
            "phase": self.phase,
            "reason": self.reason,
            "decisions": _decisions(self.decisions),
            "signals": self.signals.to_dict() if self.signals else None,
        }


@dataclass(frozen=True)
class RollbackEvent:
    decision: Decision  # the drift policy's
    removed_from: int  # first generated index removed
    removed_to: int  # one past the last removed
    removed_ids: tuple[int, ...]
    removed_text: str
    attempt: int  # the attempt number the resampled tokens use
    rollbacks: int
    conservative: bool  # whether the circuit breaker switched decoding to conservative

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "rollback",
            "decision": self.decision.to_dict(),
            "removed_from": self.removed_from,
            "removed_to": self.removed_to,
            "removed_ids": list(self.removed_ids),
            "removed_text": self.removed_text,
            "attempt": self.attempt,
            "rollbacks": self.rollbacks,
            "conservative": self.conservative,
        }


@dataclass(frozen=True)
class FlagEvent:
    position: int
    decision: Decision

    def to_dict(self) -> dict[str, Any]:
        return {"type": "flag", "position": self.position, "decision": self.decision.to_dict()}


@dataclass(frozen=True)
class FinishEvent:
    reason: str  # "pause" | "eos" | "max_tokens" | "cancel"
    generated_tokens: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "finish",
            "reason": self.reason,
            "generated_tokens": self.generated_tokens,
            "text": self.text,
        }


class Sink:
    """Receives what the loop does. Subclass and override what you need; all are no-ops."""

    def on_token(self, event: TokenEvent) -> None: ...

    def on_pause(self, event: PauseNotice) -> None: ...

    def on_rollback(self, event: RollbackEvent) -> None: ...

    def on_flag(self, event: FlagEvent) -> None: ...

    def on_finish(self, event: FinishEvent) -> None: ...

    def backlog(self) -> int:
        """Tokens received but not yet passed on (a sink that writes them elsewhere, off the
        loop's thread); a serving loop paces itself to the slowest sink."""
        return 0


Event = TokenEvent | PauseNotice | RollbackEvent | FlagEvent | FinishEvent
E = TypeVar("E", TokenEvent, PauseNotice, RollbackEvent, FlagEvent, FinishEvent)


@dataclass
class CollectingSink(Sink):
    """Keeps every event, in order; for tests and batch use."""

    events: list[Event] = field(default_factory=list)

    def on_token(self, event: TokenEvent) -> None:
        self.events.append(event)

    def on_pause(self, event: PauseNotice) -> None:
        self.events.append(event)

    def on_rollback(self, event: RollbackEvent) -> None:
        self.events.append(event)

    def on_flag(self, event: FlagEvent) -> None:
        self.events.append(event)

    def on_finish(self, event: FinishEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def tokens(self) -> list[int]:
        return [e.token_id for e in self.of(TokenEvent)]
