"""VllmEngine: the engine contract over vLLM, for one session or many at once.

A session's state is its token ids (``DecodeState`` with no KV cache of its own); vLLM's
prefix cache holds the KV. Running a state submits prompt + generated ids as one request;
the logits processor decides each token (inference/vllm_backend/generation.py), so a pause
lands on an exact token and a resumed run draws what an uninterrupted one would.

Several sessions run at once: ``submit`` each, then call ``step`` until they are done;
vLLM decodes them in one batch and a session that stops leaves the batch at that step,
without waiting for the others. ``run`` is ``submit`` + ``step`` until that one is done.
The object is not thread-safe: one thread submits and steps (see inference/serving.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, cast

import torch
from typing_extensions import Buffer

from inference import edits as edits_mod
from inference import snapshot as snapshot_mod
from inference.backend import (
    DECLARED_FEATURES,
    UnsupportedFeature,
    check_attention,
    check_policies,
)
from inference.config import SamplingParams
from inference.decode import RunRequest, StopInfo, TokenModel
from inference.edits import Edit, EditResult
from inference.policies import PauseBudget, PolicySet
from inference.prompt import Prompt, encode_prompt
from inference.signals import Signals, summarize
from inference.sink import FinishEvent, Sink
from inference.state import Checkpoint, DecodeState, Note, first_record
from inference.text import Detokenizer, Tokenizer, TokenTexts
from inference.vllm_backend.generation import Generation
from inference.vllm_backend.processor import EXTRA_KEY, REGISTRY

if TYPE_CHECKING:
    from inference.transformers_backend.attention import AttentionView
    from inference.transformers_backend.engine import Engine
    from inference.transformers_backend.lookahead import Branch
    from inference.transformers_backend.runner import ModelRunner

SETTLE_LIMIT = 1 << 30  # a settling generation stops when its replay is done
UNKNOWN = torch.empty(0)  # next_logits not computed yet (after a rebuild, restore or edit)


def logits_known(state: DecodeState) -> bool:
    return state.next_logits.numel() > 0


class SnapshotIdentity:
    """What the snapshot format asks of a runner, for a backend whose KV lives in vLLM."""

    def __init__(self, fingerprint: str, name: str, dtype: torch.dtype) -> None:
        self.fingerprint, self.name, self.dtype = fingerprint, name, dtype

    @staticmethod
    def cache_tensors(cache: object) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return []  # the KV cache stays in vLLM; a restore resubmits the ids


class VllmEngine(edits_mod.EditShortcuts):
    backend = "vllm"
    features = DECLARED_FEATURES["vllm"]

    def __init__(
        self,
        llm: Any,  # vllm.LLMEngine (vLLM ships no type information for it)
        tokenizer: Tokenizer,
        identity: SnapshotIdentity,
        max_model_len: int,
        eos_ids: frozenset[int],
        reference: Callable[[], Engine] | None = None,
    ) -> None:
        self.llm = llm  # vllm.LLMEngine, in this process
        self.tokenizer = tokenizer
        self.token_text = TokenTexts(tokenizer)
        self.eos_ids = frozenset(eos_ids)
        vocab_size = len(cast(Any, tokenizer))
        self.vocab = edits_mod.Vocabulary(tokenizer, self.token_text, vocab_size, self.eos_ids)
        self.model = TokenModel(tokenizer, self.token_text, self.eos_ids)
        self.identity = identity
        self.max_model_len = max_model_len
        self.active: dict[str, Generation] = {}
        # attention and look-ahead at a pause: the transformers engine over the same weights,
        # loaded on first use by what the loader handed over
        self.load_reference = reference
        self.reference: Engine | None = None
        self._reference_copy: tuple[Checkpoint, DecodeState] | None = None
        self.steps = 0  # vLLM steps run, for tests and benchmarks

    @property
    def fingerprint(self) -> str:
        return self.identity.fingerprint

    # ---- states ---------------------------------------------------------------------
    def encode_prompt(self, prompt: Prompt, system: str | None = None) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, system)

    def start(
        self,
        prompt: Prompt,
        params: SamplingParams | dict[str, Any] | None = None,
        policies: PolicySet | list[dict[str, Any]] | None = None,
        system: str | None = None,
        budget: PauseBudget | dict[str, Any] | None = None,
    ) -> DecodeState:
        """A state ready for ``run``; nothing is computed until it runs. ``budget`` limits
        policy pauses as on the transformers engine (inference/policies/budget.py)."""
        prompt_ids = self.encode_prompt(prompt, system)
        record, policy_set = first_record(prompt_ids, params, policies, budget)
        return self._state(record, policy_set)

    def rebuild(self, record: Checkpoint) -> DecodeState:
        """A state from a checkpoint record. Histories missing from the record are
        recomputed by replaying the generated ids (one step per token)."""
        return self._state(record, record.policy_set())

    def _state(
        self, record: Checkpoint, policy_set: PolicySet, detok: Detokenizer | None = None
    ) -> DecodeState:
        check_policies(policy_set, self.features, self.backend)
        check_attention(record.sampling, self.features, self.backend)
        self._check_length(len(record.prompt_ids) + len(record.generated_ids))
        if record.histories is None and record.generated_ids:  # replayed to recompute them
            state = DecodeState.from_checkpoint(record, Detokenizer(), policy_set, None, UNKNOWN)
            self._settle(state, list(record.generated_ids))
            return state
        if detok is None:
            detok = Detokenizer()
            detok.extend(self.tokenizer, record.generated_ids)
        return DecodeState.from_checkpoint(record, detok, policy_set, None, UNKNOWN)

    def _check_length(self, tokens: int) -> None:
        if tokens >= self.max_model_len:
            raise ValueError(
                f"{tokens} tokens do not fit this engine's context of {self.max_model_len} "
                "(CAESURA_VLLM_MAX_MODEL_LEN)"
            )

    # ---- running many -----------------------------------------------------------------
    def submit(self, state: DecodeState, request: RunRequest | None = None) -> Generation:
        """Start generating for ``state`` (see ``RunRequest``); ``step`` advances it with
        the others."""
        request = request or RunRequest()
        if request.live_attention is not None:
            raise UnsupportedFeature(
                "live attention needs the transformers backend: vLLM's attention kernels "
                "do not return attention weights"
            )
        if any(g.state is state for g in self.active.values()):
            raise ValueError("this session is already generating")
        limit = request.limit(state)
        generation = Generation(
            state=state,
            model=self.model,
            sink=request.sink or Sink(),
            control=request.control,
            limit=limit,
            pause_at=request.pause_at,
            stop_strings=request.stop_strings,
            floor=request.floor,
        )
        self._decide_first(generation)
        room = self.max_model_len - state.position
        if room <= 0 and not generation.done:
            generation.stop = StopInfo("max_tokens", position=len(state.generated_ids))
        if generation.done:
            self._finish(generation)
            return generation
        self._add(generation, min(room, max(1, limit - len(state.generated_ids) + 1)))
        return generation

    def _decide_first(self, generation: Generation) -> None:
        """A resumed run's first boundary and token come from the logits kept at its pause,
        the very row the uninterrupted run would have drawn from: Resume shows a token at
        once, not after vLLM's step over the cached prefix. vLLM then starts after it."""
        state = generation.state
        full = state.position >= self.max_model_len  # no token fits: the run stops at once
        if generation.forced is not None or not logits_known(state) or full:
            return
        token = generation.next_token(state.next_logits, 0)
        if token is not None:
            state.next_logits = UNKNOWN  # that row described the token just drawn
            generation.base = len(state.generated_ids)  # the request's prompt holds it

    def step(self) -> list[Generation]:
        """One vLLM step for every running request; returns the generations it ended."""
        if not self.active:
            return []
        outputs = self.llm.step()
        self.steps += 1
        ended_by_vllm = {o.request_id for o in outputs if o.finished}
        done = []
        for generation in list(self.active.values()):
            if not generation.done and generation.key in ended_by_vllm:
                # vLLM ends a request only at the context limit (max_tokens is one more
                # than the run's limit): the session cannot take another token
                position = len(generation.state.generated_ids)
                generation.stop = StopInfo("max_tokens", position=position)
            if generation.done:
                self._retire(generation, generation.key in ended_by_vllm)
                done.append(generation)
        return done

    def drive(self, generation: Generation) -> StopInfo:
        """Step until ``generation`` is done; raises what its decisions raised."""
        while not generation.done:
            self.step()
        if generation.error is not None:
            raise generation.error
        assert generation.stop is not None
        return generation.stop

    def run(self, state: DecodeState, request: RunRequest | None = None) -> StopInfo:
        """Generate until a stop, as ``Engine.run``; other submitted sessions advance too."""
        return self.drive(self.submit(state, request))

    def _add(self, generation: Generation, max_tokens: int) -> None:
        from vllm import SamplingParams as VllmParams

        params = VllmParams(
            temperature=0.0,  # the processor leaves one token standing; greedy takes it
            max_tokens=max_tokens,
            ignore_eos=True,  # the generation decides EOS, after its after_token policies
            detokenize=False,
            extra_args={EXTRA_KEY: generation.key},
        )
        state = generation.state
        REGISTRY[generation.key] = generation
        self.active[generation.key] = generation
        try:
            prompt = {"prompt_token_ids": state.context_ids()}
            self.llm.add_request(generation.key, prompt, params)
        except Exception:
            REGISTRY.pop(generation.key, None)
            self.active.pop(generation.key, None)
            raise

    def _retire(self, generation: Generation, ended_by_vllm: bool) -> None:
        """Take a done generation out of vLLM before it runs another step."""
        if not ended_by_vllm:
            self.llm.abort_request([generation.key])
        REGISTRY.pop(generation.key, None)
        self.active.pop(generation.key, None)
        self._finish(generation)

    @staticmethod
    def _finish(generation: Generation) -> None:
        stop = generation.stop
        if generation.forced is not None or stop is None or stop.reason == "pause":
            return  # a pause reported itself; settling reports nothing
        state = generation.state
        generation.sink.on_finish(FinishEvent(stop.reason, len(state.generated_ids), state.text))

    # ---- settling: the next token's logits, and histories of replayed tokens ----------
    def settle(self, state: DecodeState) -> None:
        """Make sure the next token's logits are known (one cached resubmission)."""
        if not logits_known(state):
            self._settle(state, [])

    def _settle(self, state: DecodeState, tail: list[int]) -> None:
        generation = Generation(
            state=state, model=self.model, limit=SETTLE_LIMIT, forced=list(tail)
        )
        self._add(generation, len(tail) + 1)
        self.drive(generation)

    # ---- snapshots ----------------------------------------------------------------------
    def snapshot(self, state: DecodeState) -> bytes:
        """The snapshot format without KV tensors: token ids, params, policy state."""
        self.settle(state)
        # the format asks a runner for its identity and KV tensors: this object answers both
        return snapshot_mod.dumps(state, cast("ModelRunner", self.identity))

    def restore(self, data: Buffer) -> DecodeState:
        """A state from a snapshot of either backend (KV tensors are not needed here)."""
        header, _ = snapshot_mod.read_header(data, self.fingerprint)
        record = Checkpoint.from_dict(header["state"])
        detok = Detokenizer.from_dict(record.generated_ids, header["detok"])
        return self._state(record, PolicySet.from_specs(record.policy_specs), detok)

    # ---- edits and signals at a pause ---------------------------------------------------
    def edit(self, state: DecodeState, *edits: Edit | dict[str, Any]) -> list[EditResult]:
        """Edits at a pause (all or nothing, planned by inference/edits.py); the new tail
        is replayed through vLLM so its tokens get their probabilities and entropies."""
        plan = edits_mod.plan(self.vocab, state, list(edits))
        old_length = len(state.generated_ids)
        self._check_length(len(state.prompt_ids) + plan.keep + len(plan.tail))
        state.detok.truncate(plan.keep)
        state.truncate_histories(plan.keep)
        state.policies.truncate(plan.keep)
        state.next_logits = UNKNOWN
        self._settle(state, plan.tail)
        edits_mod.mark_edited(state, plan.keep, plan.tail)
        return plan.results(old_length)

    def signals(self, state: DecodeState) -> Signals:
        """The next token's distribution (what a reviewer sees at a pause)."""
        self.settle(state)
        return summarize(state.next_logits, state.params.top_alternatives, self.token_text)[0]

    def add_note(self, state: DecodeState, text: str) -> Note:
        raise UnsupportedFeature(
            "the vllm backend cannot add context to a paused session: its edits replay "
            "generated ids through vLLM and have no step for a note (a record's notes are "
            "kept on a rebuild)"
        )

    def look_ahead(self, state: DecodeState, token_ids: list[int], steps: int = 5) -> list[Branch]:
        """As ``Engine.look_ahead``, through the transformers runner over the paused context
        (the same weights; one prefill, the state untouched)."""
        return self._reference_engine().look_ahead(self._reference_state(state), token_ids, steps)

    def look_ahead_in_slices(
        self, state: DecodeState, token_ids: list[int], steps: int = 5
    ) -> Generator[None, None, list[Branch]]:
        """``look_ahead`` in slices (``ServingLoop.call_in_slices``): the prefill, then each
        forward of the branches."""
        copy = self._reference_state(state)
        yield
        reference = self._reference_engine()
        return (yield from reference.look_ahead_in_slices(copy, token_ids, steps))

    def _reference_state(self, state: DecodeState) -> DecodeState:
        """The paused context rebuilt on the reference engine, kept for the next question
        about the same context (a pause's look-ahead, then its attention: one prefill)."""
        record = dataclasses.replace(state.to_checkpoint(), policy_specs=[])
        if self._reference_copy is None or self._reference_copy[0] != record:
            self._reference_copy = (record, self._reference_engine().rebuild(record))
        return self._reference_copy[1]

    def _reference_engine(self) -> Engine:
        if self.reference is None:
            if self.load_reference is None:
                raise UnsupportedFeature(
                    "this needs the transformers engine over this model, and none was given"
                )
            self.reference = self.load_reference()
        return self.reference

    def attention(self, state: DecodeState, layer: int = -1) -> AttentionView:
        """Attention at a pause, from the same weights through the transformers runner:
        one prefill over the paused context on the CPU (about 4 s at 1,024 tokens here),
        and the transformers model kept in memory once asked for."""
        return self._reference_engine().attention(self._reference_state(state), layer)
