"""One submission of a session to vLLM: the decode boundary over vLLM's rows of logits.

vLLM computes the logits; the logits processor hands this session's row to
``Generation.next_token``, which runs the boundary every backend shares
(inference/decode.py) and returns the token vLLM must emit, or ``None`` to stop. A stop
is decided on the logits of the step that would draw the next token, so nothing is
computed past it: the engine aborts the request before vLLM runs another step. A
rollback cannot be applied inside one request: without a pause it is reported as a flag.

A settling generation (``forced`` set) replays given tokens instead: it records each
one's probability and entropy, then keeps the next token's logits and stops. Edits and
rebuilds use it; it evaluates no policy and reports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference import decode
from inference.decode import StopInfo, TokenModel
from inference.signals import summarize


@dataclass(kw_only=True)
class Generation(decode.Run):
    model: TokenModel
    forced: list[int] | None = None  # settling: replay these ids, then stop
    base: int = 0  # generated tokens when submitted (the request's prompt holds them)
    steps: int = 0  # decisions made: generated tokens + the one that stopped

    def __post_init__(self) -> None:
        self.base = len(self.state.generated_ids)

    def next_token(self, row: torch.Tensor, produced: int) -> int | None:
        """The token vLLM must emit at this step, or None to stop. ``produced`` is how many
        tokens vLLM has emitted for this request so far."""
        if self.base + produced < len(self.state.generated_ids):  # vLLM recomputed a step
            return self.state.generated_ids[self.base + produced]
        if self.done:
            return None
        self.steps += 1
        try:
            if self.forced is not None:
                return self._replay(row)
            self.stop = decode.boundary(self, row, self.model)
            if self.stop is not None:
                self.state.next_logits = row.clone()
                return None
            return self._step(row)
        except Exception as exc:  # reported to the caller; the batch goes on
            self.error = exc
            return None

    def _step(self, row: torch.Tensor) -> int:
        """Draw one token, report it (no hidden states here), evaluate after_token."""
        drawn = decode.draw(self, row, self.model)
        self.state.similarity_history.append(None)
        self.sink.on_token(drawn.event)
        decode.after_token(self, drawn, rollbacks=False)
        return drawn.token

    def _replay(self, row: torch.Tensor) -> int | None:
        state = self.state
        if not self.forced:
            self.stop = StopInfo("pause", position=len(state.generated_ids))
            state.next_logits = row.clone()
            return None
        signals, _ = summarize(row, 1, self.model.token_text)
        token = self.forced.pop(0)
        state.detok.append(self.model.tokenizer, token)
        state.top1_history.append(signals.top1_prob)
        state.entropy_history.append(signals.entropy)
        state.similarity_history.append(None)
        return token
