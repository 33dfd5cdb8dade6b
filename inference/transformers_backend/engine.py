"""The transformers engine: prefill, then one token at a time, stopping only between two tokens.

The decisions between two tokens are inference/decode.py's; this engine adds what is its
own: the forward of each token through the model runner (with its attention row and
similarity when asked), the rollback (a KV splice), snapshots with the KV cache, edits
and attention at a pause.

Many sessions share one engine: ``submit`` adds a run, ``step`` gives one token to the
next run in turn, but first halts any run whose pause or cancel is waiting, so a pause
waits for at most the step in progress, whatever the number of sessions. A run that has
not stepped yet (a new session just prefilled, a resume) goes before the turn: its first
token would otherwise wait for a step of every other session (eight sessions: about 0.2 s
here), and the first token is what a caller and a reviewer who resumed wait for.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from typing_extensions import Buffer

from inference import decode
from inference import edits as edits_mod
from inference import snapshot as snapshot_mod
from inference.backend import DECLARED_FEATURES, UnsupportedFeature
from inference.config import SamplingParams
from inference.decode import Drawn, RunRequest, StopInfo, TokenModel
from inference.edits import Edit, EditResult
from inference.policies import Decision, PauseBudget, PolicySet
from inference.prompt import Prompt, encode_marked, encode_prompt
from inference.signals import Signals, summarize
from inference.sink import FinishEvent, RollbackEvent, Sink, TokenEvent
from inference.state import CIRCUIT_BREAKER_ROLLBACKS, Checkpoint, DecodeState, Note, first_record
from inference.text import Tokenizer, TokenTexts, eos_ids
from inference.transformers_backend import attention as attention_mod
from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend import lookahead as lookahead_mod
from inference.transformers_backend import rebuild as rebuild_mod
from inference.transformers_backend.runner import ModelRunner
from inference.transformers_backend.sdpa import AttentionRecorder


@dataclass(kw_only=True)
class Run(decode.Run):
    """A run on this engine: a decode run, and its live attention when asked."""

    live_layers: set[int] | None = None  # live attention: layers to average, None if off
    recorder: AttentionRecorder | None = None  # set during a step of a live run


class Engine(edits_mod.EditShortcuts):
    """Pause/resume decoding over one model. Backend-neutral surface: start, run, snapshot,
    restore, rebuild, edits and attention all take and return plain data + DecodeState."""

    backend = "transformers"
    features = DECLARED_FEATURES["transformers"]

    def __init__(
        self, runner: ModelRunner, tokenizer: Tokenizer, record_similarity: bool = False
    ) -> None:
        self.active: OrderedDict[str, Run] = OrderedDict()  # submitted runs, in turn order
        self.unstepped: set[str] = set()  # keys of submitted runs that have not stepped yet
        self.runner = runner
        self.tokenizer = tokenizer
        # Every state's tokens get their similarity to the prompt, not only drift's, so a
        # drift policy can be replayed over sessions that ran without it.
        self.record_similarity = record_similarity
        self.token_text = TokenTexts(tokenizer)
        self.eos_ids = eos_ids(tokenizer, runner.model)
        self.vocab = edits_mod.Vocabulary(
            tokenizer, self.token_text, runner.vocab_size, self.eos_ids
        )
        self.model = TokenModel(tokenizer, self.token_text, self.eos_ids)

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
        marked = encode_marked(self.tokenizer, prompt, system)
        record, policy_set = first_record(marked.ids, params, policies, budget)
        record.anchors = [dataclasses.asdict(a) for a in marked.anchors]
        record.recall = marked.recall
        return self._rebuild(record, policy_set)

    def rebuild(self, record: Checkpoint) -> DecodeState:
        """A state from a checkpoint record alone: one prefill over prompt + generated ids."""
        return self._rebuild(record, record.policy_set())

    def _rebuild(self, record: Checkpoint, policy_set: PolicySet) -> DecodeState:
        self._check_gate(record.sampling)
        return rebuild_mod.rebuild(
            self.runner, self.tokenizer, record, policy_set, self.record_similarity
        )

    def _check_gate(self, params: SamplingParams) -> None:
        if params.attention.gated and not self.runner.live_attention_supported:
            raise UnsupportedFeature(
                f"gated attention needs sdpa attention; {self.runner.name} uses another"
            )

    # ---- the loop -----------------------------------------------------------------------
    def run(self, state: DecodeState, request: RunRequest | None = None) -> StopInfo:
        """Generate until a stop (see ``RunRequest``); other submitted runs take their turns
        meanwhile. Call it again on the same state to resume."""
        return self.drive(self.submit(state, request))

    def submit(self, state: DecodeState, request: RunRequest | None = None) -> Run:
        """Start generating for ``state``; ``step`` advances it."""
        request = request or RunRequest()
        if any(run.state is state for run in self.active.values()):
            raise ValueError("this session is already generating")
        self.settle(state)
        layers = attention_mod.live_layers(request.live_attention, self.runner.num_layers)
        run = Run(
            state=state,
            sink=request.sink or Sink(),
            control=request.control,
            limit=request.limit(state),
            pause_at=request.pause_at,
            stop_strings=request.stop_strings,
            floor=request.floor,
            live_layers=layers,
        )
        self.active[run.key] = run
        self.unstepped.add(run.key)
        return run

    def step(self) -> list[Run]:
        """One token for the next run in turn, unless a run has a pause or cancel waiting:
        that run halts first. Returns the runs that ended."""
        if not self.active:
            return []
        run = next((r for r in self.active.values() if r.asked), None)
        if run is None:
            runs = self.active.values()
            run = next((r for r in runs if r.key in self.unstepped), None) or next(iter(runs))
            self.active.move_to_end(run.key)  # round robin
        self.unstepped.discard(run.key)
        self._advance(run)
        if not run.done:
            return []
        del self.active[run.key]
        return [run]

    def drive(self, run: decode.Run) -> StopInfo:
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
            stop = decode.boundary(run, state.next_logits, self.model, self._rollback)
            if stop is None:
                self._recorded_step(run)
                return
            if stop.reason != "pause":
                run.sink.on_finish(FinishEvent(stop.reason, len(state.generated_ids), state.text))
            run.stop = stop
        except Exception as exc:  # this session's failure ends its run, not the others'
            run.error = exc

    def _step(self, run: Run) -> None:
        """Draw one token, forward it, report it, evaluate after_token policies."""
        state = run.state
        drawn = decode.draw(run, state.next_logits, self.model)
        gated = gate_mod.of(state.cache) is not None
        measured = run.recorder is not None or state.prompt_hidden is not None or gated
        if not measured:  # report it as soon as it is known; the forward only prepares the next
            run.sink.on_token(drawn.event)
        if self._ends_run(run, drawn):
            state.pending = drawn.token  # its forward would only serve a step that never comes
            state.similarity_history.append(None)
        else:
            self._forward(state, drawn.token)
        if measured:  # the token's attention row and similarity come from its own forward
            run.sink.on_token(self._measured(drawn.event, run))
        rollback = decode.after_token(run, drawn, rollbacks=True)
        if rollback is not None:
            self._rollback(run, rollback, drawn.position)
        if run.after:
            self.settle(state)  # a pause shows the next token's alternatives

    def _forward(self, state: DecodeState, token: int) -> None:
        out = self.runner.forward([token], state.cache, hidden=state.prompt_hidden is not None)
        state.next_logits = out.logits[-1]
        hidden = out.hidden[-1] if out.hidden is not None else None
        state.similarity_history.append(state.similarity(hidden))

    def _ends_run(self, run: Run, drawn: Drawn) -> bool:
        """Whether this token certainly ends the run (EOS or the token limit), so its forward
        can wait until someone needs the state again. Live attention and similarity need it now."""
        needs_forward = run.live_layers is not None or run.state.prompt_hidden is not None
        ends = drawn.token in self.eos_ids or drawn.position + 1 >= run.limit
        return not needs_forward and ends

    def settle(self, state: DecodeState) -> None:
        """Run a token that a finished run left pending (see ``DecodeState.settle``)."""
        state.settle(self.runner)

    def _rollback(self, run: decode.Run, decision: Decision, position: int) -> None:
        """Cut the generated ids back to the decision's point and draw again (attempt + 1);
        the decode boundary calls it for a before_token rollback it allowed."""
        state = run.state
        assert decision.rollback_to is not None  # checked by the routing
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

    # ---- step helpers -------------------------------------------------------------------
    def _recorded_step(self, run: Run) -> None:
        """A step, recording its attention when the run streams it live; the recorder is
        set per step, as runs of other sessions take turns in between."""
        if run.live_layers is None:
            self._step(run)
            return
        with self.runner.recording_attention(run.live_layers) as recorder:
            run.recorder = recorder
            try:
                self._step(run)
            finally:
                run.recorder = None

    @staticmethod
    def _measured(event: TokenEvent, run: Run) -> TokenEvent:
        """The token event with what the token's own forward measured: its attention row
        over the context (mean over heads and layers), its similarity to the prompt, and
        the gate's kept positions and hit rate (none when its forward was left pending)."""
        row = run.recorder.mean_row() if run.recorder is not None else None
        attention = row.tolist() if row is not None else None
        similarity = run.state.similarity_history[-1]
        gate = gate_mod.of(run.state.cache) if run.state.pending is None else None
        return dataclasses.replace(
            event,
            attention=attention,
            similarity=similarity,
            gate_kept=gate.kept if gate is not None else None,
            gate_hit_rate=gate.hit_rate if gate is not None else None,
        )

    # ---- snapshot, edits, attention -----------------------------------------------------
    def snapshot(self, state: DecodeState) -> bytes:
        self.settle(state)
        return snapshot_mod.dumps(state, self.runner)

    def restore(self, data: Buffer) -> DecodeState:
        """The snapshot's state; its KV views ``data`` until written (see snapshot.py)."""
        state = snapshot_mod.loads(data, self.runner)
        self._check_gate(state.params)
        rebuild_mod.attach_gate(state, self.tokenizer)
        return state

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
        return lookahead_mod.drain(self.look_ahead_in_slices(state, token_ids, steps))

    def look_ahead_in_slices(
        self, state: DecodeState, token_ids: list[int], steps: int = 5
    ) -> Generator[None, None, list[lookahead_mod.Branch]]:
        """``look_ahead`` a forward at a time (``ServingLoop.call_in_slices``)."""
        self.settle(state)
        return (
            yield from lookahead_mod.in_slices(
                state, self.runner, self.tokenizer, token_ids, steps, self.eos_ids
            )
        )

    def signals(self, state: DecodeState) -> Signals:
        """The next token's distribution (what a reviewer sees at a pause)."""
        self.settle(state)
        return summarize(state.next_logits, state.params.top_alternatives, self.token_text)[0]
