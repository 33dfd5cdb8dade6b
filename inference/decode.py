"""The decision between two tokens, for every backend: when to stop, and which token comes next.

Per step, over one row of logits ``row`` [V] for the next token:
    boundary: control handle -> after_token pauses -> EOS / token limit
              -> signals(row) -> before_token policies -> requested pause
    step:     sample (position-keyed) -> append -> (the backend runs the token)
              -> after_token policies
Every reason a generation stops is decided in ``boundary``; nothing is computed past a
pause. The transformers engine calls these functions with the row its own forward gave, the
vLLM backend with the row of its logits processor. The policy half of both phases
(evaluate, route through the budget, note a pause) is policies/phases.py's, which the
policy replay over recorded tokens calls too. A backend adds only what is its own: running
the token through its model, and applying a rollback where it can.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from inference.config import SamplingParams
from inference.control import CANCEL, PAUSE, ControlHandle
from inference.policies import Decision, manual_decision, phases
from inference.sampler import sample
from inference.sentences import SentenceTracker, delayed_boundary
from inference.signals import Signals, summarize, with_chosen
from inference.sink import FlagEvent, PauseNotice, Sink, TokenEvent
from inference.state import CIRCUIT_BREAKER_ROLLBACKS, DecodeState
from inference.text import Tokenizer, stop_string_at

# A backend that can apply a rollback: (the run, the decision, generated tokens before it).
RollBack = Callable[["Run", Decision, int], None]


@dataclass(frozen=True)
class StopInfo:
    reason: str  # "pause" | "eos" | "stop" | "max_tokens" | "cancel"
    decision: Decision | None = None  # the first decision behind a pause
    decisions: tuple[Decision, ...] = ()
    position: int = 0  # generated tokens when it stopped

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "decision": self.decision.to_dict() if self.decision else None,
            "decisions": [d.to_dict() for d in self.decisions],
            "position": self.position,
        }


@dataclass(frozen=True)
class DeliveryFloor:
    """Text an application may already have received, which no automatic rollback may
    remove: ``released`` characters sent before this run and, under delayed delivery
    (``delay_sentences``), whatever the run's text let it send since, by the same rule
    (inference.sentences.delayed_boundary). A rollback that would cut into it is reported as
    a flag instead; a reviewer's own edits are checked against the same text by the web side."""

    released: int = 0
    delay_sentences: int | None = None  # None: nothing more is sent while the run goes on


@dataclass(frozen=True)
class RunRequest:
    """How one run of a state should go; every backend's ``run`` and ``submit`` take it."""

    sink: Sink | None = None
    control: ControlHandle | None = None
    max_new_tokens: int | None = None  # cap on the generation's TOTAL generated tokens
    pause_at: int | None = None  # pause when this many tokens exist
    live_attention: int | str | None = None  # "mean" or a layer: an attention row per token
    stop_strings: tuple[str, ...] = ()  # the run ends once the text holds one
    floor: DeliveryFloor | None = None  # delivered text: automatic rollbacks stay above it

    def limit(self, state: DecodeState) -> int:
        """Generated tokens at which the run stops (default: the state's max_new_tokens)."""
        return (
            self.max_new_tokens if self.max_new_tokens is not None else state.params.max_new_tokens
        )


@dataclass
class TokenModel:
    """What the decisions need to know about the model's tokens."""

    tokenizer: Tokenizer
    token_text: Callable[[int], str]  # one id -> its text (TokenTexts)
    eos_ids: Collection[int]


@dataclass(kw_only=True)
class Run:
    """One session generating, on either backend: what it carries between its steps, and
    how it ended."""

    state: DecodeState
    sink: Sink = field(default_factory=Sink)
    control: ControlHandle | None = None
    limit: int = 0  # total generated tokens at which the run stops
    pause_at: int | None = None
    stop_strings: tuple[str, ...] = ()  # RunRequest.stop_strings
    floor: DeliveryFloor | None = None  # RunRequest.floor
    locked: int = 0  # characters the floor covers so far (only ever grows)
    sentences: SentenceTracker = field(default_factory=SentenceTracker)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    after: list[Decision] = field(default_factory=list)  # after_token pauses pending
    signals: Signals | None = None  # the next token's distribution, once computed
    logprobs: np.ndarray | None = None  # [V] log-probs of the next token
    stop: StopInfo | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.stop is not None or self.error is not None

    @property
    def asked(self) -> bool:
        """A pause or cancel is waiting for this run, or its control failed: either way its
        boundary must run now (a failing control ends this run there, not the others)."""
        try:
            return self.control is not None and self.control.poll() is not None
        except Exception:
            return True


@dataclass(frozen=True)
class Drawn:
    """A token just sampled and appended: what the backend reports and evaluates it by."""

    token: int
    position: int  # its index among the generated ids
    start: int  # char offset of its text in the generated text
    signals: Signals  # the distribution it was drawn from, chosen_prob set
    event: TokenEvent


# ---- the boundary ---------------------------------------------------------------------
def boundary(
    run: Run, row: torch.Tensor, model: TokenModel, roll_back: RollBack | None = None
) -> StopInfo | None:
    """Between two tokens: every reason to stop, in priority order, in one place.
    ``roll_back`` applies a before_token rollback (a backend without one reports it as a
    flag); a rollback that shortened the text starts the boundary again over the state's
    new logits."""
    state = run.state
    while True:
        command = run.control.poll() if run.control is not None else None
        position = len(state.generated_ids)
        if run.after:  # the pause shows the next token's alternatives, as every pause does
            _summarize(run, row, model)
        if (stop := hard_stop(run, command, position, model.eos_ids)) is not None:
            return stop
        verdict = before_token(run, row, position, model, roll_back is not None)
        if isinstance(verdict, StopInfo):
            return verdict
        if verdict is not None and roll_back is not None:
            roll_back(run, verdict, position)
            if len(state.generated_ids) != position:
                row = state.next_logits
                continue
        state.skip_before_at = None
        return requested_pause(run, command, position)


def hard_stop(
    run: Run, command: str | None, position: int, eos_ids: Collection[int]
) -> StopInfo | None:
    """A cancel, a pending after_token pause, EOS or the token limit."""
    state = run.state
    if command == CANCEL:
        return StopInfo("cancel", position=position)
    if run.after:
        return pause(run, "after_token", run.after)
    if state.generated_ids and state.generated_ids[-1] in eos_ids:
        return StopInfo("eos", position=position)
    if run.stop_strings and stop_string_at(state.text, run.stop_strings) is not None:
        return StopInfo("stop", position=position)
    if position >= run.limit:
        return StopInfo("max_tokens", position=position)
    return None


def before_token(
    run: Run, row: torch.Tensor, position: int, model: TokenModel, rollbacks: bool
) -> StopInfo | Decision | None:
    """The next token's signals, then before_token policies: a pause, a rollback for the
    caller to apply, or nothing. Skipped once right after a resume."""
    state = run.state
    signals = _summarize(run, row, model)
    if state.skip_before_at == position:
        return None
    routed = phases.before_token(state, signals, position, _roll_back_check(run, rollbacks))
    _report(run, routed.flags, position)
    if routed.pauses:
        return pause(run, "before_token", routed.pauses)
    return routed.rollback


def _summarize(run: Run, row: torch.Tensor, model: TokenModel) -> Signals:
    """The next token's distribution: what its draw and a pause before it show."""
    params = run.state.params
    run.signals, run.logprobs = summarize(row, params.top_alternatives, model.token_text)
    return run.signals


def requested_pause(run: Run, command: str | None, position: int) -> StopInfo | None:
    """A pause asked for from outside: through the control handle or ``pause_at``."""
    if command == PAUSE and run.control is not None:
        reason = run.control.reason
        run.control.clear()
    elif run.pause_at == position:
        reason = f"pause at token {position}"
    else:
        return None
    return pause(run, "manual", [manual_decision(reason, position)])


def pause(run: Run, phase: str, decisions: list[Decision]) -> StopInfo:
    state = run.state
    position = len(state.generated_ids)
    run.after = []
    if phase != "manual" and run.control is not None and run.control.poll() == PAUSE:
        run.control.clear()  # this pause answers a request that came meanwhile: it pauses once
    phases.note_pause(state, position, phase)
    if phase != "after_token":
        state.skip_before_at = position  # resuming must not re-fire before_token policies
    notice = PauseNotice(position, phase, decisions[0].reason, tuple(decisions), run.signals)
    run.sink.on_pause(notice)
    return StopInfo("pause", decisions[0], tuple(decisions), position)


# ---- the step ---------------------------------------------------------------------------
def draw(run: Run, row: torch.Tensor, model: TokenModel) -> Drawn:
    """Sample the next token from ``row`` (keyed by position and attempt) and append it,
    with its probability and entropy. Reporting it is the backend's: it may wait for the
    token's own forward to measure more."""
    state = run.state
    position = len(state.generated_ids)
    params = state.effective_params
    token = sample(row, params, _context(state, params), state.position, state.attempt)
    assert run.signals is not None and run.logprobs is not None  # the boundary's summary
    signals = with_chosen(run.signals, run.logprobs, token)
    start, delta = state.detok.append(model.tokenizer, token)
    state.top1_history.append(signals.top1_prob)
    state.entropy_history.append(signals.entropy)
    event = TokenEvent(position, token, delta, start, signals, state.attempt)
    return Drawn(token, position, start, signals, event)


def after_token(run: Run, drawn: Drawn, rollbacks: bool) -> Decision | None:
    """The after_token policies on the newest token: pauses wait for the next boundary;
    returns a rollback for the caller to apply."""
    state = run.state
    if run.floor is not None:  # what may have been sent, before any rollback is weighed
        if not run.sentences.text:  # the text the run started from counts too
            lock(run, run.floor, state.text[: drawn.start])
        lock(run, run.floor, state.text)
    generated = len(state.generated_ids)  # the newest token included
    may_roll_back = _roll_back_check(run, rollbacks)
    routed = phases.after_token(state, drawn.signals, generated, drawn.start, may_roll_back)
    _report(run, routed.flags, drawn.position)
    run.after = routed.pauses
    return routed.rollback


def _report(run: Run, flags: list[Decision], position: int) -> None:
    for decision in flags:
        run.sink.on_flag(FlagEvent(position, decision))


def _roll_back_check(run: Run, rollbacks: bool) -> phases.MayRollBack | None:
    """Whether a rollback may be applied now; None when the backend cannot apply one (then a
    rollback without a pause is reported as a flag)."""
    return (lambda d: _may_roll_back(run, d)) if rollbacks else None


def _may_roll_back(run: Run, decision: Decision) -> bool:
    """A rollback needs generated tokens to remove, a closed circuit breaker, and a point
    that keeps what a reviewer wrote (an edit, a note) and every character the delivery
    floor covers."""
    state, point = run.state, decision.rollback_to
    if state.rollbacks >= CIRCUIT_BREAKER_ROLLBACKS or not state.generated_ids or point is None:
        return False
    keep = max(0, min(point, len(state.generated_ids)))
    if keep < state.edited_upto:
        return False
    if run.floor is None:
        return True
    return state.detok.token_span_chars(keep, keep)[0] >= lock(run, run.floor, state.text)


def lock(run: Run, floor: DeliveryFloor, text: str) -> int:
    """The characters the delivery floor covers, given that the run's text was ``text``:
    those sent before the run, and what delayed delivery may have sent of any text the run
    has had (the most it ever allowed)."""
    run.locked = max(run.locked, floor.released)
    if floor.delay_sentences is not None:
        sentences = run.sentences.complete_sentences(text)
        run.locked = max(run.locked, delayed_boundary(text, floor.delay_sentences, (), sentences))
    return run.locked


def _context(state: DecodeState, params: SamplingParams) -> torch.Tensor:
    if params.repetition_penalty == 1.0:
        return torch.empty(0, dtype=torch.long)
    # Every token the model reads, notes included: as a fresh run over the same context would.
    return torch.tensor(state.context_ids(), dtype=torch.long)
