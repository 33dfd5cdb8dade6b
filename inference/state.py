"""DecodeState: everything a paused generation is, frozen between two tokens.

Invariant between steps: the KV cache covers prompt + generated ids, and ``next_logits``
is the distribution for the next generated token. One exception: a run that ended on EOS or
its token limit leaves its last token ``pending``; ``settle`` runs it when needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import torch

from inference.config import SamplingParams
from inference.gating import AnchorSpan
from inference.text import Detokenizer

if TYPE_CHECKING:
    from inference.policies import PauseBudget, PolicySet
    from inference.transformers_backend.runner import ModelRunner

CIRCUIT_BREAKER_ROLLBACKS = 2  # after this many rollbacks: conservative decoding, no more rollbacks


@dataclass(frozen=True)
class Note:
    """Context the model reads but did not write (e.g. the time, told on a late resume): its
    tokens sit in the KV cache before generated token ``at``, never in the generated text."""

    at: int  # generated tokens before it
    ids: list[int]
    text: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Note:
        return cls(int(data["at"]), [int(i) for i in data["ids"]], str(data["text"]))


@dataclass
class DecodeState:
    prompt_ids: list[int]
    params: SamplingParams  # as requested; see ``effective_params`` for the circuit breaker
    policies: PolicySet
    cache: Any  # the runner's KV cache (opaque here), covering prompt + generated ids
    next_logits: torch.Tensor  # [V]
    detok: Detokenizer = field(default_factory=Detokenizer)  # generated ids and their text
    attempt: int = 0  # bumped by every rollback; part of the sampling key
    rollbacks: int = 0
    conservative: bool = False  # the circuit breaker: see CIRCUIT_BREAKER_ROLLBACKS
    top1_history: list[float] = field(default_factory=list)  # one per generated token
    entropy_history: list[float] = field(default_factory=list)
    similarity_history: list[float | None] = field(default_factory=list)
    prompt_hidden: torch.Tensor | None = None  # [H] mean last-layer hidden state of the prompt
    pending: int | None = None  # last token not yet run (a run that ended left it); see settle
    skip_before_at: int | None = None  # resume here without re-firing before_token policies
    edited_upto: int = 0  # generated ids a reviewer wrote or reviewed up to: no rollback cuts below
    notes: list[Note] = field(default_factory=list)  # context inserted between generated tokens
    anchors: list[AnchorSpan] = field(default_factory=list)  # prompt spans a gate always keeps
    recall: bool = False  # the prompt asked for full attention (<RECALL>)

    @property
    def generated_ids(self) -> list[int]:
        return self.detok.ids

    @property
    def text(self) -> str:
        return self.detok.text

    @property
    def position(self) -> int:
        """Absolute position of the next token (prompt + notes + generated)."""
        return len(self.prompt_ids) + len(self.detok.ids) + sum(len(n.ids) for n in self.notes)

    def context_ids(self) -> list[int]:
        """Every token the KV cache covers, in order: prompt, then generated ids with the
        notes at their places."""
        if not self.notes:  # the common case, asked at every step under a repetition penalty
            return self.prompt_ids + self.generated_ids
        ids = list(self.prompt_ids)
        for i, token in enumerate([*self.generated_ids, None]):
            for note in self.notes:
                if note.at == i:
                    ids += note.ids
            if token is not None:
                ids.append(token)
        return ids

    def kv_index(self, index: int) -> int:
        """Where generated token ``index`` sits in the context (its notes come before it)."""
        before = sum(len(n.ids) for n in self.notes if n.at <= index)
        return len(self.prompt_ids) + index + before

    @property
    def effective_params(self) -> SamplingParams:
        return self.params.conservative() if self.conservative else self.params

    def settle(self, runner: ModelRunner) -> None:
        """Run a token that a finished run left pending, restoring the invariant that the KV
        cache covers every token and next_logits is ready."""
        if self.pending is None:
            return
        token, self.pending = self.pending, None
        self.next_logits = runner.forward([token], self.cache).logits[-1]

    def similarity(self, hidden: torch.Tensor | None) -> float | None:
        """Cosine similarity of a token's last-layer hidden state [H] to the prompt's mean;
        None when drift is not watched (no prompt baseline) or the state was not computed."""
        if hidden is None or self.prompt_hidden is None:
            return None
        return float(torch.cosine_similarity(hidden, self.prompt_hidden, dim=0))

    def truncate_histories(self, n: int) -> None:
        del self.top1_history[n:], self.entropy_history[n:], self.similarity_history[n:]

    def histories(self) -> dict[str, list[Any]]:
        return {
            "top1": list(self.top1_history),
            "entropy": list(self.entropy_history),
            "similarity": list(self.similarity_history),
        }

    @classmethod
    def from_checkpoint(
        cls,
        record: Checkpoint,
        detok: Detokenizer,
        policies: PolicySet | None = None,
        cache: Any = None,
        next_logits: torch.Tensor | None = None,
    ) -> DecodeState:
        """The state ``record`` describes, over the backend's ``cache`` and ``next_logits``
        (none yet: empty). ``detok`` holds the generated ids' text; ``policies`` (default:
        the record's own) get the record's firing state. Histories the record lacks are left
        empty for the backend to recompute."""
        if policies is None:
            policies = record.policy_set()
        elif record.policy_state:
            policies.load_state_dict(record.policy_state)
        histories = record.histories or {"top1": [], "entropy": [], "similarity": []}
        return cls(
            prompt_ids=list(record.prompt_ids),
            params=record.sampling,
            policies=policies,
            cache=cache,
            next_logits=torch.empty(0) if next_logits is None else next_logits,
            detok=detok,
            attempt=record.attempt,
            rollbacks=record.rollbacks,
            conservative=record.is_conservative,
            top1_history=list(histories["top1"]),
            entropy_history=list(histories["entropy"]),
            similarity_history=list(histories["similarity"]),
            skip_before_at=record.skip_before_at,
            edited_upto=min(record.edited_upto, len(record.generated_ids)),
            notes=record.note_list(),
            anchors=record.anchor_list(),
            recall=record.recall,
        )

    def to_checkpoint(self) -> Checkpoint:
        return Checkpoint(
            prompt_ids=list(self.prompt_ids),
            generated_ids=list(self.generated_ids),
            params=self.params,
            policy_specs=self.policies.to_specs(),
            policy_state=self.policies.state_dict(),
            budget=self.policies.budget.to_dict(),
            muted=sorted(self.policies.muted),
            attempt=self.attempt,
            rollbacks=self.rollbacks,
            conservative=self.conservative,
            histories=self.histories(),
            skip_before_at=self.skip_before_at,
            edited_upto=self.edited_upto,
            notes=[asdict(note) for note in self.notes],
            anchors=[asdict(anchor) for anchor in self.anchors],
            recall=self.recall,
        )

    def summary(self) -> dict[str, Any]:
        """JSON-able description without tensors: the checkpoint record and the text."""
        return {**self.to_checkpoint().to_dict(), "text": self.text}


@dataclass
class Checkpoint:
    """A paused state without tensors: everything a rebuild (one prefill over the ids) or a
    snapshot needs besides the KV cache. The one place that lists a paused state's fields;
    ``to_dict``/``from_dict`` are its JSON form, read back leniently (missing optional
    fields take their defaults, unknown ones are ignored) so older records stay readable."""

    prompt_ids: list[int]
    generated_ids: list[int]
    params: SamplingParams | dict[str, Any] | None = (
        None  # a dict or None is read as SamplingParams
    )
    policy_specs: list[dict[str, Any]] = field(default_factory=list)
    policy_state: dict[str, Any] | None = None  # PolicySet.state_dict(): firings and cooldowns
    attempt: int = 0
    rollbacks: int = 0
    conservative: bool | None = None  # None: derived from ``rollbacks`` (the circuit breaker)
    histories: dict[str, list[Any]] | None = (
        None  # top1/entropy/similarity per token; None: recomputed
    )
    skip_before_at: int | None = None
    edited_upto: int = 0  # DecodeState.edited_upto (0 in records older than it)
    budget: dict[str, Any] | None = None  # PauseBudget.to_dict(); None: no budget
    muted: list[str] = field(default_factory=list)  # policies a reviewer silenced
    notes: list[dict[str, Any]] = field(default_factory=list)  # Note as dicts: at, ids, text
    anchors: list[dict[str, Any]] = field(default_factory=list)  # name, start, end: positions
    recall: bool = False  # <RECALL> in the prompt: full attention whatever the params say

    def __post_init__(self) -> None:
        self.prompt_ids = [int(i) for i in self.prompt_ids]
        self.generated_ids = [int(i) for i in self.generated_ids]
        if not isinstance(self.params, SamplingParams):
            self.params = SamplingParams.from_dict(self.params)
        self.policy_specs = list(self.policy_specs or [])
        self.muted = sorted(str(name) for name in self.muted or [])
        self.notes = [asdict(Note.from_dict(n)) for n in self.notes or []]
        self.anchors = [asdict(a) for a in self.anchor_list()]
        self.recall = bool(self.recall)

    def note_list(self) -> list[Note]:
        return [Note.from_dict(n) for n in self.notes]

    def anchor_list(self) -> list[AnchorSpan]:
        return [
            AnchorSpan(str(a["name"]), int(a["start"]), int(a["end"])) for a in self.anchors or []
        ]

    def policy_set(self) -> PolicySet:
        """The record's policies, budget and muted names, with their firing state."""
        from inference.policies import PolicySet

        policies = PolicySet.from_specs(self.policy_specs, self.budget, self.muted)
        if self.policy_state:
            policies.load_state_dict(self.policy_state)
        return policies

    @property
    def is_conservative(self) -> bool:
        """The circuit breaker's state: recorded, else derived from the rollbacks."""
        if self.conservative is None:
            return self.rollbacks >= CIRCUIT_BREAKER_ROLLBACKS
        return bool(self.conservative)

    @property
    def sampling(self) -> SamplingParams:
        assert isinstance(self.params, SamplingParams)  # see __post_init__
        return self.params

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["params"] = self.sampling.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], **overrides: Any) -> Checkpoint:
        known = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in data.items() if k in known}, **overrides})


def first_record(
    prompt_ids: list[int],
    params: SamplingParams | dict[str, Any] | None,
    policies: PolicySet | list[dict[str, Any]] | None,
    budget: PauseBudget | dict[str, Any] | None,
) -> tuple[Checkpoint, PolicySet]:
    """The record of a session that has generated nothing yet, and its policies: what both
    engines' ``start`` build a state from. ``budget`` replaces the policies' own."""
    from inference.policies import PauseBudget, PolicySet

    if not prompt_ids:
        raise ValueError("the prompt is empty")
    policy_set = (
        policies if isinstance(policies, PolicySet) else PolicySet.from_specs(list(policies or []))
    )
    if budget is not None:
        policy_set.budget = (
            budget if isinstance(budget, PauseBudget) else PauseBudget.from_dict(budget)
        )
    sampling = params if isinstance(params, SamplingParams) else SamplingParams.from_dict(params)
    return Checkpoint(prompt_ids, [], sampling, policy_set.to_specs()), policy_set
