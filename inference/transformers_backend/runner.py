"""ModelRunner: the one place that knows how to drive a transformers causal LM.

Everything model-specific lives here: prefill, one decode step (compiled when the settings
ask and the model allows: compiled.py), cropping the KV cache (kv_cache.py), hidden states,
attention weights (sdpa.py records them live), the weight layout for CPU decoding
(layout.py) and the model fingerprint. The engine only sees ids in, logits (and optionally
last-layer hidden states) out, and an opaque cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache, PreTrainedModel

from inference.compile_cache import use_cache_dir
from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend import int8, kv_cache, sdpa
from inference.transformers_backend.compiled import CompiledStep, unsupported
from inference.transformers_backend.gated_attention import GatePlan
from inference.transformers_backend.int8 import Int8Linear
from inference.transformers_backend.layout import lay_out_wide_weights, use_small_batch_linear
from inference.transformers_backend.sdpa import AttentionRecorder
from inference.transformers_backend.settings import StepSettings

log = logging.getLogger(__name__)


@dataclass
class StepOutput:
    logits: torch.Tensor  # [N, V] for the last N positions of the forward
    hidden: torch.Tensor | None  # [N, H] last-layer hidden states of those positions


class ModelRunner:
    def __init__(
        self, model: PreTrainedModel, name: str = "", settings: StepSettings | None = None
    ) -> None:
        """``settings``: how the decode step runs; none: eager, float weights."""
        self.model = model.eval()
        self.settings = settings or StepSettings(compile=False)
        if self.settings.weights == "int8":
            int8.quantize(model)
        use_small_batch_linear(model)
        compiling = self.settings.compile and unsupported(model) is None
        if not compiling:  # the compiled step streams row-major weights faster (step_graph.py)
            lay_out_wide_weights(model)
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.config = model.config
        self.forward_calls = 0  # counted for tests: "no token computed past a pause"
        self.tokens_forwarded = 0
        self.live_attention_supported = self._use_recording_attention()
        self.fingerprint = model_fingerprint(model)
        self.step = self._compiled_step()

    def _compiled_step(self) -> CompiledStep | None:
        if not self.settings.compile:
            return None
        reason = unsupported(self.model)
        if reason is not None:
            log.warning("%s: decoding eagerly (%s)", self.name, reason)
            return None
        use_cache_dir()
        return CompiledStep(self.model)

    @property
    def compiled(self) -> bool:
        return self.step is not None

    # ---- shapes -------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return int(self.config.get_text_config().num_hidden_layers)

    @property
    def vocab_size(self) -> int:
        return int(self._head().out_features)

    @property
    def dtype(self) -> torch.dtype:
        dtype: torch.dtype = self.model.dtype  # transformers declares it untyped
        return dtype

    def _head(self) -> nn.Linear | Int8Linear:
        """The LM head: last-layer hidden states [N, H] -> logits [N, V]."""
        head = self.model.get_output_embeddings()
        if not isinstance(head, nn.Linear | Int8Linear):
            raise TypeError(f"{self.name} has no linear LM head")
        return head

    # ---- forward ------------------------------------------------------------------------
    def new_cache(self) -> DynamicCache:
        return kv_cache.new_cache(self.config)

    @torch.inference_mode()
    def forward(
        self, ids: list[int], cache: DynamicCache, keep: int = 1, hidden: bool = False
    ) -> StepOutput:
        """Run ``ids`` after what ``cache`` covers; the cache grows in place.

        Returns logits (and hidden states) for the last ``keep`` positions.
        """
        self.forward_calls += 1
        self.tokens_forwarded += len(ids)
        gated = gate_mod.of(cache) is not None  # a gated state decodes eagerly (no compiled gate)
        if len(ids) == 1 and self.step is not None and not gated and self.step.covers(cache):
            return self._compiled_forward(ids[0], cache, hidden)
        input_ids = torch.tensor([ids], dtype=torch.long)
        with self._last_hidden(hidden) as caught, self._gating(cache, ids):
            out = self.model(
                input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=keep
            )
        logits = out.logits[0, -keep:].float()  # [keep, V]
        states = caught[0][0, -keep:].float() if hidden else None
        return StepOutput(logits, states)

    def _compiled_forward(self, token: int, cache: DynamicCache, hidden: bool) -> StepOutput:
        assert self.step is not None
        out = self.step(token, cache)
        if sdpa.recorder is not None:
            sdpa.recorder.take(out.rows, cache.get_seq_length())
        return StepOutput(out.logits, out.hidden.float() if hidden else None)

    @torch.inference_mode()
    def forward_batch(self, ids: list[int], cache: DynamicCache) -> torch.Tensor:
        """One token per batch row after what ``cache`` covers (all rows the same length, so
        no padding): next-token logits [B, V]. For look-ahead branches over a forked cache."""
        self.forward_calls += 1
        self.tokens_forwarded += len(ids)
        out = self.model(
            input_ids=torch.tensor([[i] for i in ids], dtype=torch.long),  # [B, 1]
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits: torch.Tensor = out.logits[:, -1].float()  # transformers' output is untyped
        return logits

    @torch.inference_mode()
    def hidden_states(self, ids: list[int], cache: DynamicCache) -> tuple[StepOutput, torch.Tensor]:
        """Prefill returning next-token logits and the last-layer hidden states of every input
        position ([N, H]), for similarity baselines and rebuilt histories."""
        self.forward_calls += 1
        self.tokens_forwarded += len(ids)
        with self._last_hidden() as caught, self._gating(cache, ids):
            out = self.model(
                input_ids=torch.tensor([ids], dtype=torch.long),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        states = caught[0][0].float()  # [N, H]
        return StepOutput(out.logits[0, -1:].float(), states[-1:]), states

    @contextlib.contextmanager
    def _gating(self, cache: DynamicCache, ids: list[int]) -> Iterator[None]:
        """Gate the forward of ``ids`` over ``cache`` when the cache carries a gate."""
        gate = gate_mod.of(cache)
        if gate is None:
            yield
            return
        previous = sdpa.gate_plan
        sdpa.gate_plan = plan = gate.plan(cache.get_seq_length(), ids)
        try:
            yield
        finally:
            sdpa.gate_plan = previous
        if len(ids) == 1:
            gate.took(plan)

    @contextlib.contextmanager
    def _last_hidden(self, wanted: bool = True) -> Iterator[list[torch.Tensor]]:
        """Catches the last-layer hidden states ([1, N, H], after the final norm) of the
        forward run inside, as they leave the decoder. ``output_hidden_states`` would keep
        every layer's until the forward returns: about 70 KB a token with the default
        model, some 300 MB more for a 4,096-token prefill that needs only the last."""
        caught: list[torch.Tensor] = []
        if not wanted:
            yield caught
            return

        def keep(module: nn.Module, args: Any, output: Any) -> None:
            caught.append(output.last_hidden_state)

        handle = self.model.base_model.register_forward_hook(keep)
        try:
            yield caught
        finally:
            handle.remove()

    @torch.inference_mode()
    def logits_from_hidden(self, states: torch.Tensor) -> torch.Tensor:
        """[N, H] last-layer hidden states -> [N, V] logits."""
        head = self._head()
        logits: torch.Tensor = head(states.to(self.dtype))  # nn.Module calls are untyped
        return logits.float()

    # ---- cache --------------------------------------------------------------------------
    @staticmethod
    def cache_length(cache: DynamicCache) -> int:
        return cache.get_seq_length()

    @staticmethod
    def crop(cache: DynamicCache, length: int) -> None:
        """Keep the first ``length`` positions."""
        kv_cache.truncate(cache, length)

    @staticmethod
    def cache_tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values), each [B, H_kv, S, D]; views into the live cache."""
        return kv_cache.tensors(cache)

    @staticmethod
    def cache_bytes(cache: DynamicCache) -> int:
        return kv_cache.nbytes(cache)

    def cache_from_tensors(
        self, tensors: list[tuple[torch.Tensor, torch.Tensor]], borrowed: bool = False
    ) -> DynamicCache:
        return kv_cache.from_tensors(self.config, tensors, borrowed)

    # ---- attention ----------------------------------------------------------------------
    @torch.inference_mode()
    def last_token_attention(self, cache: DynamicCache, last_id: int) -> torch.Tensor:
        """Attention of the last context position over the whole context, [L, H, S].

        Re-runs only the last token, with eager attention and output_attentions, and puts
        the original last position back so the frozen state is untouched bit for bit. With
        the compiled step, that step re-runs it instead, on a copy (see below).
        """
        compiled = self.step is not None and self.step.covers(cache)
        if compiled and gate_mod.of(cache) is None and cache.get_seq_length() > 1:
            return self._compiled_last_attention(cache, last_id)
        length = cache.get_seq_length()
        last = [
            (k[..., -1:, :].clone(), v[..., -1:, :].clone()) for k, v in kv_cache.tensors(cache)
        ]
        implementation = self.config._attn_implementation
        self.crop(cache, length - 1)
        try:
            self.model.set_attn_implementation("eager")
            out = self.model(
                input_ids=torch.tensor([[last_id]]),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
                output_attentions=True,
            )
        finally:
            self.model.set_attn_implementation(implementation)
            self._put_back(cache, length - 1, last)
        return torch.stack([a[0, :, -1].float() for a in out.attentions])  # [L, H, S]

    def _compiled_last_attention(self, cache: DynamicCache, last_id: int) -> torch.Tensor:
        """``last_token_attention`` as one compiled step over a copy of the cache without its
        last position: the step returns every layer's attention row anyway, and it takes a
        decode step's time where the eager re-run with every attention map took about four
        (the serving loop runs it between the sessions' steps, so a pause waits less)."""
        assert self.step is not None
        length = cache.get_seq_length()
        before = [
            (k[..., :-1, :].clone(), v[..., :-1, :].clone()) for k, v in self.cache_tensors(cache)
        ]
        out = self.step(last_id, self.cache_from_tensors(before))
        return out.rows[..., :length].float()  # [L, H, S]

    @torch.inference_mode()
    def gated_rerun(self, cache: DynamicCache, last_id: int) -> GatePlan | None:
        """The gate's selection at the last context position, every layer's captured (None
        for an ungated cache): the last token re-run, its position put back as it was."""
        gate = gate_mod.of(cache)
        if gate is None:
            return None
        length = cache.get_seq_length()
        last = [
            (k[..., -1:, :].clone(), v[..., -1:, :].clone()) for k, v in kv_cache.tensors(cache)
        ]
        self.crop(cache, length - 1)
        plan = gate.plan(length - 1, [last_id])
        plan.measure, plan.capture = True, []
        previous, sdpa.gate_plan = sdpa.gate_plan, plan
        try:
            self.model(input_ids=torch.tensor([[last_id]]), past_key_values=cache, use_cache=True)
        finally:
            sdpa.gate_plan = previous
            self._put_back(cache, length - 1, last)
        return plan

    @staticmethod
    def _put_back(
        cache: DynamicCache, length: int, last: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> None:
        for layer, (keys, values) in zip(kv_cache.layers(cache), last, strict=True):
            if layer.get_seq_length() > length:  # the re-run may have stopped part way
                layer.crop(length - layer.get_seq_length())
            layer.update(keys, values)

    @contextlib.contextmanager
    def recording_attention(self, layers: set[int] | None) -> Iterator[AttentionRecorder]:
        """While active, each single-token forward leaves its attention scores in the
        recorder (read them with ``recorder.mean_row()``) at no change to the numerics."""
        if not self.live_attention_supported:
            raise RuntimeError(f"live attention needs sdpa attention; {self.name} uses another")
        previous = sdpa.recorder
        sdpa.recorder = current = AttentionRecorder(layers)
        try:
            yield current
        finally:
            sdpa.recorder = previous

    def _use_recording_attention(self) -> bool:
        if self.config._attn_implementation != "sdpa":
            return False
        self.model.set_attn_implementation(sdpa.ENGINE_ATTENTION)
        return True


def model_fingerprint(model: PreTrainedModel) -> str:
    """Identifies the weights a KV cache was computed with: architecture, config and a
    strided sample of every parameter (cheap, yet differs between checkpoints)."""
    digest = hashlib.sha256()
    config = model.config.to_dict()
    for volatile in (
        "_name_or_path",
        "transformers_version",
        "_attn_implementation",
        "torch_dtype",
        "dtype",
    ):
        config.pop(volatile, None)
    digest.update(type(model).__name__.encode())
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    with torch.inference_mode():
        for name, param in model.named_parameters():
            flat = param.detach().reshape(-1)
            sample = flat[:: max(1, flat.numel() // 64)].float().contiguous()
            digest.update(name.encode() + str(tuple(param.shape)).encode())
            digest.update(sample.numpy().tobytes())
    digest.update(int8.digest(model).encode())  # nothing for float weights
    return digest.hexdigest()[:32]
