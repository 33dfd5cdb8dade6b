"""DecodeState: everything a paused generation is, frozen between two tokens.

Invariant between steps: the KV cache covers prompt + generated ids, and ``next_logits``
is the distribution for the next generated token. One exception: a run that ended on EOS or
its token limit leaves its last token ``pending``; ``Engine.settle`` runs it when needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from inference.config import SamplingParams
from inference.text import Detokenizer


@dataclass
class DecodeState:
    prompt_ids: list[int]
    params: SamplingParams  # as requested; see ``effective_params`` for the circuit breaker
    policies: Any  # inference.policies.PolicySet
    cache: Any  # the runner's KV cache, covering prompt + generated ids
    next_logits: torch.Tensor  # [V]
    detok: Detokenizer = field(default_factory=Detokenizer)  # generated ids and their text
    attempt: int = 0  # bumped by every rollback; part of the sampling key
    rollbacks: int = 0
    conservative: bool = False  # circuit breaker: switched after two rollbacks
    top1_history: list[float] = field(default_factory=list)  # one per generated token
    entropy_history: list[float] = field(default_factory=list)
    similarity_history: list[float | None] = field(default_factory=list)
    prompt_hidden: torch.Tensor | None = None  # [H] mean last-layer hidden state of the prompt
    pending: int | None = None  # last token not yet run (a run that ended left it); see settle
    skip_before_at: int | None = None  # resume here without re-firing before_token policies
    pause: dict | None = None  # the last pause (PauseEvent.to_dict()), None while running
    stop_reason: str | None = None  # why the last run stopped

    @property
    def generated_ids(self) -> list[int]:
        return self.detok.ids

    @property
    def text(self) -> str:
        return self.detok.text

    @property
    def position(self) -> int:
        """Absolute position of the next token (prompt + generated)."""
        return len(self.prompt_ids) + len(self.detok.ids)

    @property
    def effective_params(self) -> SamplingParams:
        return self.params.conservative() if self.conservative else self.params

    def truncate_histories(self, n: int) -> None:
        del self.top1_history[n:], self.entropy_history[n:], self.similarity_history[n:]

    def histories(self) -> dict:
        return {
            "top1": list(self.top1_history),
            "entropy": list(self.entropy_history),
            "similarity": list(self.similarity_history),
        }

    def summary(self) -> dict:
        """JSON-able description without tensors (for storage next to the token ids)."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "generated_ids": list(self.generated_ids),
            "text": self.text,
            "params": self.params.to_dict(),
            "attempt": self.attempt,
            "rollbacks": self.rollbacks,
            "conservative": self.conservative,
            "policy_specs": self.policies.to_specs(),
            "policy_state": self.policies.state_dict(),
            "histories": self.histories(),
            "skip_before_at": self.skip_before_at,
            "pause": self.pause,
            "stop_reason": self.stop_reason,
        }
