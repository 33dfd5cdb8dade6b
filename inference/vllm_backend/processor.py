"""The vLLM logits processor through which Caesura decides every token of its requests.

vLLM builds one processor per engine and calls ``apply`` once per step with the logits of
the whole batch ([B, V], one row per running request). Each Caesura request carries its
generation's key in ``SamplingParams.extra_args``; the processor looks the generation up
in ``REGISTRY``, asks it for the token, and masks the row so that vLLM's greedy pick is
exactly that token. A generation that stops gets its row forced to ``STOP_TOKEN``; the
engine aborts the request right after the step, so the token is never run.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from inference.vllm_backend.generation import Generation

EXTRA_KEY = "caesura_generation"
STOP_TOKEN = 0  # any id: vLLM emits it and the request is aborted before it runs

# key -> the generation a request serves. The engine runs in this process (see settings).
REGISTRY: dict[str, Generation] = {}


class CaesuraLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        # batch row -> (generation, the request's output ids: vLLM's live list)
        self.rows: dict[int, tuple[Generation, list[int]]] = {}

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        key = (sampling_params.extra_args or {}).get(EXTRA_KEY)
        if key is not None and key not in REGISTRY:
            raise ValueError(f"no Caesura generation is registered under {key!r}")

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            generation = REGISTRY.get(str((params.extra_args or {}).get(EXTRA_KEY)))
            if generation is None:
                self.rows.pop(index, None)  # not ours: vLLM samples it as usual
            else:
                self.rows[index] = (generation, output_ids)
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if row_b is not None and direction == MoveDirectionality.SWAP:
                self.rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        # logits: [B, V] float32, row i = batch index i. Decisions read a host copy (one
        # transfer per step on a GPU); the mask is written where vLLM samples.
        if not self.rows:
            return logits
        host = logits if logits.device.type == "cpu" else logits.cpu()
        rows, tokens = [], []
        for index, (generation, output_ids) in self.rows.items():
            if index >= logits.shape[0]:
                continue
            token = generation.next_token(host[index], len(output_ids))
            rows.append(index)
            tokens.append(STOP_TOKEN if token is None else token)
        # one masked write for the batch, after every row was read
        at = torch.tensor(rows, dtype=torch.long, device=logits.device)
        logits.index_fill_(0, at, float("-inf"))
        logits[at, torch.tensor(tokens, dtype=torch.long, device=logits.device)] = 0.0
        return logits
