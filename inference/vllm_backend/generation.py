"""One submission of a session to vLLM, and every decision of its steps.

vLLM computes the logits; the logits processor hands this session's row to
``Generation.next_token``, which runs the same boundary as the transformers engine
(inference/engine.py) and returns the token vLLM must emit, or ``None`` to stop. A stop
is decided on the logits of the step that would draw the next token, so nothing is
computed past it: the engine aborts the request before vLLM runs another step.

Per call, with ``row`` the next token's raw logits [V]:
    boundary: control handle -> after_token pauses -> EOS / token limit
              -> signals(row) -> before_token policies -> manual pause
    step:     sample (position-keyed) -> append -> report -> after_token policies

A settling generation (``forced`` set) replays given tokens instead: it records each
one's probability and entropy, then keeps the next token's logits and stops. Edits and
rebuilds use it; it evaluates no policy and reports nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from inference.config import SamplingParams
from inference.control import CANCEL, PAUSE, ControlHandle
from inference.engine import StopInfo
from inference.policies import Decision, manual_decision
from inference.sampler import sample
from inference.signals import Signals, summarize, with_chosen
from inference.sink import FlagEvent, PauseNotice, Sink, TokenEvent
from inference.state import DecodeState
from inference.text import Tokenizer


@dataclass
class Model:
    """What a generation needs to know about the model's tokens."""

    tokenizer: Tokenizer
    token_text: Callable[[int], str]  # one id -> its text (TokenTexts)
    eos_ids: frozenset[int]


@dataclass
class Generation:
    state: DecodeState
    model: Model
    sink: Sink = field(default_factory=Sink)
    control: ControlHandle | None = None
    limit: int = 0  # total generated tokens at which the run stops
    pause_at: int | None = None
    forced: list[int] | None = None  # settling: replay these ids, then stop
    key: str = field(default_factory=lambda: uuid.uuid4().hex)  # vLLM request id
    base: int = 0  # generated tokens when submitted (the request's prompt holds them)
    after: list[Decision] = field(default_factory=list)  # after_token pauses pending
    signals: Signals | None = None  # the next token's distribution, once computed
    logprobs: np.ndarray | None = None  # [V] log-probs of the next token
    stop: StopInfo | None = None
    error: BaseException | None = None
    steps: int = 0  # decisions made: generated tokens + the one that stopped

    def __post_init__(self) -> None:
        self.base = len(self.state.generated_ids)

    @property
    def done(self) -> bool:
        return self.stop is not None or self.error is not None

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
            self.stop = self._boundary(row)
            if self.stop is not None:
                self.state.next_logits = row.clone()
                return None
            return self._step(row)
        except Exception as exc:  # reported to the caller; the batch goes on
            self.error = exc
            return None

    # ---- the boundary, in the transformers engine's order ---------------------------
    def _boundary(self, row: torch.Tensor) -> StopInfo | None:
        state = self.state
        command = self.control.poll() if self.control is not None else None
        position = len(state.generated_ids)
        if command == CANCEL:
            return StopInfo("cancel", position=position)
        if self.after:
            return self._pause("after_token", self.after)
        if state.generated_ids and state.generated_ids[-1] in self.model.eos_ids:
            return StopInfo("eos", position=position)
        if position >= self.limit:
            return StopInfo("max_tokens", position=position)
        k = state.params.top_alternatives
        self.signals, self.logprobs = summarize(row, k, self.model.token_text)
        if state.skip_before_at != position:
            before = self._evaluate("before_token", self.signals, len(state.text))
            if pauses := self._route(before, position):
                return self._pause("before_token", pauses)
        state.skip_before_at = None
        if command == PAUSE and self.control is not None:
            reason = self.control.reason
            self.control.clear()
        elif self.pause_at == position:
            reason = f"pause at token {position}"
        else:
            return None
        return self._pause("manual", [manual_decision(reason, position)])

    def _step(self, row: torch.Tensor) -> int:
        """Sample one token (position-keyed), append it, report it, evaluate after_token."""
        state = self.state
        position = len(state.generated_ids)
        params = state.effective_params
        token = sample(row, params, self._context(params), state.position, state.attempt)
        assert self.signals is not None and self.logprobs is not None  # the boundary's
        signals = with_chosen(self.signals, self.logprobs, token)
        start, delta = state.detok.append(self.model.tokenizer, token)
        state.top1_history.append(signals.top1_prob)
        state.entropy_history.append(signals.entropy)
        state.similarity_history.append(None)
        self.sink.on_token(TokenEvent(position, token, delta, start, signals, state.attempt))
        decisions = self._evaluate("after_token", signals, start)
        self.after = self._route(decisions, position)
        return token

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

    # ---- policies -------------------------------------------------------------------
    def _evaluate(self, phase: str, signals: Signals, new_text_start: int) -> list[Decision]:
        state = self.state
        return state.evaluate_policies(phase, signals, new_text_start)

    def _route(self, decisions: list[Decision], position: int) -> list[Decision]:
        """Report flags; returns the decisions that pause. A rollback cannot be applied
        inside one request, so without a pause it is reported as a flag, as the
        transformers engine reports one its circuit breaker refuses."""
        state = self.state
        pause, refused = state.policies.arbitrate(
            [d for d in decisions if d.action == "pause"], len(state.generated_ids), state.text
        )
        pauses = [pause] if pause is not None else []
        for decision in decisions:
            if decision.action == "flag" or (decision.action == "rollback" and not pauses):
                self.sink.on_flag(FlagEvent(position, decision))
        for decision in refused:  # over the pause budget or outranked: kept as a flag
            self.sink.on_flag(FlagEvent(position, decision))
        if not pauses:
            return []
        return pauses + [d for d in decisions if d.action == "rollback"]

    def _pause(self, phase: str, decisions: list[Decision]) -> StopInfo:
        state = self.state
        position = len(state.generated_ids)
        self.after = []
        state.policies.note_pause(position, policy=phase != "manual")
        if phase != "after_token":
            state.skip_before_at = position  # resuming must not re-fire before_token policies
        notice = PauseNotice(position, phase, decisions[0].reason, tuple(decisions), self.signals)
        self.sink.on_pause(notice)
        return StopInfo("pause", decisions[0], tuple(decisions), position)

    def _context(self, params: SamplingParams) -> torch.Tensor:
        if params.repetition_penalty == 1.0:
            return torch.empty(0, dtype=torch.long)
        state = self.state
        return torch.tensor(state.prompt_ids + state.generated_ids, dtype=torch.long)
