"""The decode loop: prefill, then one token at a time, stopping only between two tokens.

Per step, with the state always "KV covers every token, next_logits ready":
    boundary: control handle -> after_token pauses -> EOS / token limit
              -> signals(next_logits) -> before_token policies -> manual pause
    step:     sample -> append -> forward(new token) -> after_token policies
Every reason to stop is decided in ``_boundary``; nothing is computed past a pause.

Many sessions share one engine: ``submit`` adds a run, ``step`` gives one token to the
next run in turn, but first halts any run whose pause or cancel is waiting, so a pause
waits for at most the step in progress, whatever the number of sessions.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from inference import attention as attention_mod
from inference import edits as edits_mod
from inference import lookahead as lookahead_mod
from inference import rebuild as rebuild_mod
from inference import snapshot as snapshot_mod
from inference.backend import HIDDEN_STATES, LIVE_ATTENTION
from inference.config import SamplingParams
from inference.control import CANCEL, PAUSE, ControlHandle
from inference.edits import Edit, EditResult
from inference.policies import Decision, PauseBudget, PolicySet, manual_decision
from inference.prompt import Prompt, encode_prompt
from inference.runner import AttentionRecorder, ModelRunner
from inference.sampler import sample
from inference.signals import Signals, summarize, with_chosen
from inference.sink import FinishEvent, FlagEvent, PauseNotice, RollbackEvent, Sink, TokenEvent
from inference.state import CIRCUIT_BREAKER_ROLLBACKS, Checkpoint, DecodeState, Note, first_record
from inference.text import Tokenizer, TokenTexts


@dataclass(frozen=True)
class StopInfo:
    reason: str  # "pause" | "eos" | "max_tokens" | "cancel"
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


@dataclass
class Run:
    """One session generating: what it carries between its steps, and how it ended."""

    state: DecodeState
    sink: Sink
    control: ControlHandle | None
    limit: int
    pause_at: int | None
    live_layers: set[int] | None = None  # live attention: layers to average, None if off
    recorder: AttentionRecorder | None = None  # set during a step of a live run
    after: list[Decision] = field(default_factory=list)  # after_token pauses pending
    signals: Signals | None = None  # the next token's distribution, once computed
    logprobs: np.ndarray | None = None  # [V] log-probs of the next token
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
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


class Engine(edits_mod.EditShortcuts):
    """Pause/resume decoding over one model. Backend-neutral surface: start, run, snapshot,
    restore, rebuild, edits and attention all take and return plain data + DecodeState."""

    backend = "transformers"
    features = frozenset({LIVE_ATTENTION, HIDDEN_STATES})

    def __init__(
        self, runner: ModelRunner, tokenizer: Tokenizer, record_similarity: bool = False
    ) -> None:
        self.active: OrderedDict[str, Run] = OrderedDict()  # submitted runs, in turn order
        self.runner = runner
        self.tokenizer = tokenizer
        # Every state's tokens get their similarity to the prompt, not only drift's, so a
        # drift policy can be replayed over sessions that ran without it.
        self.record_similarity = record_similarity
        self.token_text = TokenTexts(tokenizer)
        self.eos_ids = _eos_ids(tokenizer, runner.model)
        self.vocab = edits_mod.Vocabulary(
            tokenizer, self.token_text, runner.vocab_size, self.eos_ids
        )

    # ---- starting -----------------------------------------------------------------------
    def encode_prompt(self, prompt: Prompt, system: str | None = None) -> list[int]:
        """A string (user message), chat messages, or token ids -> prompt ids."""
        return encode_prompt(self.tokenizer, prompt, system)

    def start(
        self,
        prompt: Prompt,
        params: SamplingParams | dict[str, Any] | None = None,
        policies: PolicySet | list[dict[str, Any]] | None = None,
        system: str | None = None,
        budget: PauseBudget | dict[str, Any] | None = None,
    ) -> DecodeState:
        """Prefill the prompt; returns a state ready for ``run``. ``budget`` limits policy
        pauses (inference/policies/budget.py); none: policies pause wherever they fire."""
        prompt_ids = self.encode_prompt(prompt, system)
        record, policy_set = first_record(prompt_ids, params, policies, budget)
        return self._rebuild(record, policy_set)

    def rebuild(self, record: Checkpoint) -> DecodeState:
        """A state from a checkpoint record alone: one prefill over prompt + generated ids."""
        return self._rebuild(record, record.policy_set())

    def _rebuild(self, record: Checkpoint, policy_set: PolicySet) -> DecodeState:
        return rebuild_mod.rebuild(
            self.runner, self.tokenizer, record, policy_set, self.record_similarity
        )

    # ---- the loop -----------------------------------------------------------------------
    def run(
        self,
        state: DecodeState,
        sink: Sink | None = None,
        control: ControlHandle | None = None,
        max_new_tokens: int | None = None,
        pause_at: int | None = None,
        live_attention: int | str | None = None,
    ) -> StopInfo:
        """Generate until a stop. ``max_new_tokens`` caps the generation's total generated
        tokens (default: params.max_new_tokens); ``pause_at`` pauses when that many tokens
        exist; ``live_attention`` ("mean" or a layer index) adds an attention row per token.
        Other submitted runs take their turns meanwhile."""
        return self.drive(
            self.submit(state, sink, control, max_new_tokens, pause_at, live_attention)
        )

    def submit(
        self,
        state: DecodeState,
        sink: Sink | None = None,
        control: ControlHandle | None = None,
        max_new_tokens: int | None = None,
        pause_at: int | None = None,
        live_attention: int | str | None = None,
    ) -> Run:
        """Start generating for ``state`` (arguments as ``run``); ``step`` advances it."""
        if any(run.state is state for run in self.active.values()):
            raise ValueError("this session is already generating")
        limit = max_new_tokens if max_new_tokens is not None else state.params.max_new_tokens
        self.settle(state)
        layers = attention_mod.live_layers(live_attention, self.runner.num_layers)
        run = Run(state, sink or Sink(), control, limit, pause_at, layers)
        self.active[run.key] = run
        return run

    def step(self) -> list[Run]:
        """One token for the next run in turn, unless a run has a pause or cancel waiting:
        that run halts first. Returns the runs that ended."""
        if not self.active:
            return []
        run = next((r for r in self.active.values() if r.asked), None)
        if run is None:
            run = next(iter(self.active.values()))
            self.active.move_to_end(run.key)  # round robin
        self._advance(run)
        if not run.done:
            return []
        del self.active[run.key]
        return [run]

    def drive(self, run: Run) -> StopInfo:
        """Step until ``run`` is done; raises what it raised."""
        while not run.done:
            self.step()
        if run.error is not None:
            raise run.error
        assert run.stop is not None
        return run.stop

    def _advance(self, run: Run) -> None:
        """The run's boundary, then its next token unless the boundary stopped it."""
        state = run.state
        try:
            stop = self._boundary(state, run)
            if stop is None:
                self._recorded_step(state, run)
                return
            if stop.reason != "pause":
                run.sink.on_finish(FinishEvent(stop.reason, len(state.generated_ids), state.text))
            run.stop = stop
        except Exception as exc:  # this session's failure ends its run, not the others'
            run.error = exc

    def _boundary(self, state: DecodeState, run: Run) -> StopInfo | None:
        """Between two tokens: every reason to stop, in priority order, in one place. The
        checks only decide; a before_token rollback they return is applied here, and a
        rollback that shortened the text sends the boundary back to the start."""
        while True:
            command = run.control.poll() if run.control is not None else None
            position = len(state.generated_ids)
            if (stop := self._hard_stop(state, run, command, position)) is not None:
                return stop
            verdict = self._before_token(state, run, position)
            if isinstance(verdict, StopInfo):
                return verdict
            if verdict is not None:
                self._rollback(state, run, verdict, position)
                if len(state.generated_ids) != position:
                    continue
            state.skip_before_at = None
            return self._requested_pause(state, run, command, position)

    def _hard_stop(
        self, state: DecodeState, run: Run, command: str | None, position: int
    ) -> StopInfo | None:
        """A cancel, a pending after_token pause, EOS or the token limit."""
        if command == CANCEL:
            return StopInfo("cancel", position=position)
        if run.after:
            return self._pause(state, run, "after_token", run.after)
        if state.generated_ids and state.generated_ids[-1] in self.eos_ids:
            return StopInfo("eos", position=position)
        if position >= run.limit:
            return StopInfo("max_tokens", position=position)
        return None

    def _before_token(
        self, state: DecodeState, run: Run, position: int
    ) -> StopInfo | Decision | None:
        """The next token's signals, then before_token policies: a pause, a rollback for the
        caller to apply, or nothing. Skipped once right after a resume."""
        run.signals, run.logprobs = summarize(
            state.next_logits, state.params.top_alternatives, self.token_text
        )
        if state.skip_before_at == position:
            return None
        before = self._evaluate(state, "before_token", run.signals, len(state.text))
        pauses, rollback = self._route(state, run, before, position)
        if pauses:
            return self._pause(state, run, "before_token", pauses)
        return rollback

    def _requested_pause(
        self, state: DecodeState, run: Run, command: str | None, position: int
    ) -> StopInfo | None:
        """A pause asked for from outside: through the control handle or ``pause_at``."""
        if command == PAUSE and run.control is not None:
            reason = run.control.reason
            run.control.clear()
        elif run.pause_at == position:
            reason = f"pause at token {position}"
        else:
            return None
        return self._pause(state, run, "manual", [manual_decision(reason, position)])

    def _step(self, state: DecodeState, run: Run) -> None:
        """Sample one token, append it, forward it, evaluate after_token policies."""
        position = len(state.generated_ids)
        params = state.effective_params
        token = sample(
            state.next_logits, params, self._context(state, params), state.position, state.attempt
        )
        assert run.signals is not None and run.logprobs is not None  # the boundary's summary
        signals = with_chosen(run.signals, run.logprobs, token)
        start, delta = state.detok.append(self.tokenizer, token)
        state.top1_history.append(signals.top1_prob)
        state.entropy_history.append(signals.entropy)
        event = TokenEvent(position, token, delta, start, signals, state.attempt)
        measured = run.recorder is not None or state.prompt_hidden is not None
        if not measured:  # report it as soon as it is known; the forward only prepares the next
            run.sink.on_token(event)
        if self._ends_run(state, run, token, position):
            state.pending = token  # its forward would only serve a step that never comes
            state.similarity_history.append(None)
        else:
            self._forward(state, token)
        if measured:  # the token's attention row and similarity come from its own forward
            run.sink.on_token(self._measured(event, state, run))
        decisions = self._evaluate(state, "after_token", signals, start)
        run.after, rollback = self._route(state, run, decisions, position)
        if rollback is not None:
            self._rollback(state, run, rollback, position)
        if run.after:
            self.settle(state)  # a pause shows the next token's alternatives

    def _forward(self, state: DecodeState, token: int) -> None:
        out = self.runner.forward([token], state.cache, hidden=state.prompt_hidden is not None)
        state.next_logits = out.logits[-1]
        hidden = out.hidden[-1] if out.hidden is not None else None
        state.similarity_history.append(state.similarity(hidden))

    def _ends_run(self, state: DecodeState, run: Run, token: int, position: int) -> bool:
        """Whether this token certainly ends the run (EOS or the token limit), so its forward
        can wait until someone needs the state again. Live attention and similarity need it now."""
        needs_forward = run.live_layers is not None or state.prompt_hidden is not None
        return not needs_forward and (token in self.eos_ids or position + 1 >= run.limit)

    def settle(self, state: DecodeState) -> None:
        """Run a token that a finished run left pending (see ``DecodeState.settle``)."""
        state.settle(self.runner)

    def _evaluate(
        self, state: DecodeState, phase: str, signals: Signals, new_text_start: int
    ) -> list[Decision]:
        return state.evaluate_policies(phase, signals, new_text_start)

    def _route(
        self, state: DecodeState, run: Run, decisions: list[Decision], position: int
    ) -> tuple[list[Decision], Decision | None]:
        """Report flags; returns the decisions that pause and a rollback to apply.

        The pause budget picks at most one pause (inference/policies/budget.py) and turns the
        others into flags; a pause outranks a rollback (the reviewer sees the rollback
        decision with it); a rollback the circuit breaker refuses is reported as a flag.
        """
        pause, refused = state.policies.arbitrate(
            [d for d in decisions if d.action == "pause"], len(state.generated_ids), state.text
        )
        pauses = [pause] if pause is not None else []
        rollback = next((d for d in decisions if d.action == "rollback"), None)
        for decision in decisions:
            refused_rollback = decision.action == "rollback" and not pauses
            if decision.action == "flag" or (refused_rollback and decision is not rollback):
                run.sink.on_flag(FlagEvent(position, decision))
        for decision in refused:  # over the budget or outranked: kept as a flag
            run.sink.on_flag(FlagEvent(position, decision))
        if pauses:
            return pauses + [d for d in decisions if d.action == "rollback"], None
        if rollback is not None and not self._may_roll_back(state, rollback):
            run.sink.on_flag(FlagEvent(position, rollback))
            rollback = None
        return [], rollback

    def _may_roll_back(self, state: DecodeState, decision: Decision) -> bool:
        """A rollback needs generated tokens to remove and a closed circuit breaker."""
        return (
            state.rollbacks < CIRCUIT_BREAKER_ROLLBACKS
            and bool(state.generated_ids)
            and decision.rollback_to is not None
        )

    def _rollback(self, state: DecodeState, run: Run, decision: Decision, position: int) -> None:
        assert decision.rollback_to is not None  # checked by _may_roll_back
        keep = max(0, min(decision.rollback_to, position))
        removed_ids = tuple(state.generated_ids[keep:])
        removed_text = state.text[state.detok.token_span_chars(keep, keep)[0] :]
        edits_mod.truncate_to(self.runner, self.vocab, state, keep)
        state.attempt += 1
        state.rollbacks += 1
        state.conservative = state.conservative or state.rollbacks >= CIRCUIT_BREAKER_ROLLBACKS
        event = RollbackEvent(
            decision, keep, position + 1, removed_ids, removed_text,
            state.attempt, state.rollbacks, state.conservative,
        )  # fmt: skip
        run.sink.on_rollback(event)

    def _pause(
        self, state: DecodeState, run: Run, phase: str, decisions: list[Decision]
    ) -> StopInfo:
        position = len(state.generated_ids)
        run.after = []
        state.policies.note_pause(position, policy=phase != "manual")
        if phase != "after_token":
            state.skip_before_at = position  # resuming must not re-fire before_token policies
        event = PauseNotice(position, phase, decisions[0].reason, tuple(decisions), run.signals)
        run.sink.on_pause(event)
        return StopInfo("pause", decisions[0], tuple(decisions), position)

    # ---- step helpers -------------------------------------------------------------------
    def _context(self, state: DecodeState, params: SamplingParams) -> torch.Tensor:
        if params.repetition_penalty == 1.0:
            return torch.empty(0, dtype=torch.long)
        return torch.tensor(state.prompt_ids + state.generated_ids, dtype=torch.long)

    def _recorded_step(self, state: DecodeState, run: Run) -> None:
        """A step, recording its attention when the run streams it live; the recorder is
        set per step, as runs of other sessions take turns in between."""
        if run.live_layers is None:
            self._step(state, run)
            return
        with self.runner.recording_attention(run.live_layers) as recorder:
            run.recorder = recorder
            try:
                self._step(state, run)
            finally:
                run.recorder = None

    def _measured(self, event: TokenEvent, state: DecodeState, run: Run) -> TokenEvent:
        """The token event with what the token's own forward measured."""
        similarity = state.similarity_history[-1]
        return dataclasses.replace(event, attention=self._row(run), similarity=similarity)

    @staticmethod
    def _row(run: Run) -> list[float] | None:
        """The newest token's attention over the context, mean over heads (and layers)."""
        row = run.recorder.mean_row() if run.recorder is not None else None
        return row.tolist() if row is not None else None

    # ---- snapshot, edits, attention -----------------------------------------------------
    def snapshot(self, state: DecodeState) -> bytes:
        self.settle(state)
        return snapshot_mod.dumps(state, self.runner)

    def restore(self, data: bytes) -> DecodeState:
        return snapshot_mod.loads(data, self.runner)

    def edit(self, state: DecodeState, *edits: Edit | dict[str, Any]) -> list[EditResult]:
        """Apply edits (Edit objects or dicts) at a pause; all or nothing. A pending last
        token is only run when the edit keeps it (see ``edits.splice``)."""
        plan = edits_mod.plan(self.vocab, state, edits)
        return edits_mod.apply(self.runner, self.vocab, state, plan)

    def add_note(self, state: DecodeState, text: str) -> Note:
        """Let the model read ``text`` before its next token (e.g. the time after a long
        pause) without writing it: the note's tokens extend the KV cache and the position,
        never the generated ids or text. The checkpoint records it, so a snapshot or a
        rebuild puts it back at the same place."""
        self.settle(state)
        return edits_mod.add_note(self.runner, self.vocab, state, text)

    def attention(self, state: DecodeState, layer: int = -1) -> attention_mod.AttentionView:
        self.settle(state)
        return attention_mod.view(state, self.runner, self.token_text, layer)

    def look_ahead(
        self, state: DecodeState, token_ids: list[int], steps: int = 5
    ) -> list[lookahead_mod.Branch]:
        """For each candidate next token, the greedy tokens after it; the state is untouched."""
        self.settle(state)
        return lookahead_mod.look_ahead(
            state, self.runner, self.tokenizer, token_ids, steps, self.eos_ids
        )

    def signals(self, state: DecodeState) -> Signals:
        """The next token's distribution (what a reviewer sees at a pause)."""
        self.settle(state)
        return summarize(state.next_logits, state.params.top_alternatives, self.token_text)[0]


def _eos_ids(tokenizer: Tokenizer, model: object) -> frozenset[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return frozenset(i for i in ids if i is not None)
