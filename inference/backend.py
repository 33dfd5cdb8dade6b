"""The engine contract both backends satisfy: start, run until a stop, snapshot, edits.

``inference.transformers_backend.engine.Engine`` is the reference: live attention, hidden states
and every policy kind. ``inference.vllm_backend.VllmEngine`` serves many sessions at once
(continuous batching, prefix caching) and decides every pause inside a logits processor.
The web side programs against this Protocol and asks ``features`` what a backend offers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from typing_extensions import Buffer

from inference.config import SamplingParams
from inference.decode import Run, RunRequest, StopInfo
from inference.edits import Edit, EditResult
from inference.policies import PauseBudget, PolicySet
from inference.prompt import Prompt
from inference.signals import Signals
from inference.state import Checkpoint, DecodeState
from inference.text import Tokenizer

BACKENDS = ("transformers", "vllm")

# What a backend may offer beyond the shared contract.
LIVE_ATTENTION = "live_attention"  # an attention row with every token
HIDDEN_STATES = "hidden_states"  # policies that read hidden states (drift)
BATCHING = "batching"  # several sessions decode in one batch
GATED_ATTENTION = "gated_attention"  # attention gating (inference/gating.py)

# What each backend declares, readable without importing it (the web process shows or hides
# what depends on a feature and loads no engine).
DECLARED_FEATURES: dict[str, frozenset[str]] = {
    "transformers": frozenset({LIVE_ATTENTION, HIDDEN_STATES, GATED_ATTENTION}),
    "vllm": frozenset({BATCHING}),
}


class UnsupportedFeature(ValueError):
    """The backend cannot do this; the message says what is missing and why."""


@runtime_checkable
class Backend(Protocol):
    backend: str  # "transformers" | "vllm"
    features: frozenset[str]
    tokenizer: Tokenizer
    eos_ids: frozenset[int]

    def encode_prompt(self, prompt: Prompt, system: str | None = None) -> list[int]: ...

    def start(
        self,
        prompt: Prompt,
        params: SamplingParams | dict[str, Any] | None = None,
        policies: PolicySet | list[dict[str, Any]] | None = None,
        system: str | None = None,
        budget: PauseBudget | dict[str, Any] | None = None,
    ) -> DecodeState: ...

    def rebuild(self, record: Checkpoint) -> DecodeState: ...

    def run(self, state: DecodeState, request: RunRequest | None = None) -> StopInfo: ...

    # many sessions at once: ``run`` is ``submit`` then ``step`` until that one is done
    @property
    def active(self) -> Mapping[str, Run]: ...  # the submitted runs not yet done, by key

    def submit(self, state: DecodeState, request: RunRequest | None = None) -> Run: ...

    def step(self) -> Sequence[Run]: ...  # the runs this step ended

    def snapshot(self, state: DecodeState) -> bytes: ...

    def restore(self, data: Buffer) -> DecodeState: ...

    def edit(self, state: DecodeState, *edits: Edit | dict[str, Any]) -> list[EditResult]: ...

    def signals(self, state: DecodeState) -> Signals: ...


def check_policies(policies: PolicySet, features: frozenset[str], backend: str) -> None:
    """Refuse, with a clear message, policies this backend cannot evaluate."""
    if policies.needs_hidden_states and HIDDEN_STATES not in features:
        names = ", ".join(p.name for p in policies.policies if p.needs_hidden_states)
        raise UnsupportedFeature(
            f"the {backend} backend cannot run policies that read hidden states ({names}): "
            "drift compares each token's hidden state with the prompt's, and this backend "
            "does not expose hidden states; use the transformers backend for them"
        )
