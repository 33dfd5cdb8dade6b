"""ModelRunner: the one place that knows how to drive a transformers causal LM.

Everything model-specific lives here: prefill, one decode step, cropping the KV cache
(inference/transformers_backend/kv_cache.py), hidden states, attention weights, the weight layout for CPU
decoding and the model fingerprint. The engine only sees ids in, logits (and optionally
last-layer hidden states) out, and an opaque cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface, DynamicCache, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from inference.transformers_backend import kv_cache

ENGINE_ATTENTION = "caesura_sdpa"


@dataclass
class StepOutput:
    logits: torch.Tensor  # [N, V] for the last N positions of the forward
    hidden: torch.Tensor | None  # [N, H] last-layer hidden states of those positions


class AttentionRecorder:
    """Captures, for a single-query forward, the query's attention scores per layer.

    Only one product per layer during the forward; the softmax and the means over heads
    and layers run once per token, batched over layers, in ``mean_row``.
    """

    def __init__(self, layers: set[int] | None) -> None:
        self.layers = layers  # None: all layers
        self.scores: list[torch.Tensor] = []  # per recorded layer: [Hq, S], before softmax
        self.scalings: list[float] = []

    def record(
        self, module: nn.Module, query: torch.Tensor, key: torch.Tensor, scaling: float
    ) -> None:
        layer = getattr(module, "layer_idx", None)
        if query.shape[2] != 1 or (self.layers is not None and layer not in self.layers):
            return
        # query: [1, Hq, 1, D]; key: [1, Hkv, S, D]. Group the query heads by their shared
        # KV head instead of repeating the keys (no copy of the cache).
        heads, kv_heads, dim = query.shape[1], key.shape[1], query.shape[-1]
        grouped = query.reshape(kv_heads, heads // kv_heads, dim)  # [Hkv, G, D]
        self.scores.append(torch.matmul(grouped, key[0].transpose(1, 2)).reshape(heads, -1))
        self.scalings.append(scaling)

    def mean_row(self) -> torch.Tensor | None:
        """The newest token's attention over the context, [S]: softmax per head, then the
        mean over heads and recorded layers. Clears what was recorded."""
        if not self.scores:
            return None
        scores = torch.stack(self.scores).float()  # [L, Hq, S]
        scaling = torch.tensor(self.scalings, dtype=scores.dtype)[:, None, None]
        self.scores, self.scalings = [], []
        return torch.softmax(scores * scaling, dim=-1).mean((0, 1))


_recorder: AttentionRecorder | None = None


def _engine_sdpa(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' sdpa, plus a side copy of the attention row when recording, and
    grouped-query attention without copies for masked forwards on CPU."""
    if _recorder is not None:
        _recorder.record(module, query, key, scaling or query.shape[-1] ** -0.5)
    if attention_mask is not None and _grouped_with_mask(module, query, attention_mask, kwargs):
        return _grouped_query_sdpa(query, key, value, attention_mask, scaling), None
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


def _grouped_with_mask(
    module: nn.Module,
    query: torch.Tensor,
    attention_mask: torch.Tensor,
    kwargs: dict[str, Any],
) -> bool:
    return (
        query.device.type == "cpu"
        and getattr(module, "num_key_value_groups", 1) > 1
        and not module.training
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
        and attention_mask.shape[0] == 1
        and attention_mask.shape[1] == 1
    )


def _grouped_query_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float | None,
) -> torch.Tensor:
    """Masked attention for several new tokens after cached ones, without repeating K/V.

    With a mask, transformers repeats keys and values per query head (a copy of the whole
    cache in every layer) and CPU sdpa has no fast grouped path. Instead the query heads
    that share a KV head become extra query rows of that head: [1, Hkv, G*M, D] against
    [1, Hkv, S, D], the mask repeated per group. The same sums, up to float rounding.
    """
    batch, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    grouped = query.reshape(batch, kv_heads, group * rows, dim)
    mask = mask.expand(batch, 1, rows, mask.shape[-1]).repeat(1, 1, group, 1)
    out = nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=mask, scale=scaling
    )  # [B, Hkv, G*M, D]
    return out.reshape(batch, heads, rows, dim).transpose(1, 2).contiguous()


AttentionInterface.register(ENGINE_ATTENTION, _engine_sdpa)
AttentionMaskInterface.register(ENGINE_ATTENTION, sdpa_mask)  # same masks as sdpa


class SmallBatchLinear(nn.Linear):
    """nn.Linear that computes a few rows (2..32) as weight @ x^T.

    On CPU a linear over a handful of rows (an edit's tail) with a row-major weight takes
    a general matrix product about twice as slow as the single-row one; weight @ x^T keeps
    the fast path for up to a few dozen rows. One row (a decode step), long inputs (a
    prefill) and column-major weights (see ``lay_out_wide_weights``) are unchanged.
    """

    MAX_ROWS = 32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        if not 2 <= rows <= self.MAX_ROWS or not _row_major_on_cpu(self.weight):
            return super().forward(x)
        flat = x.reshape(rows, self.in_features)
        out = torch.matmul(self.weight, flat.t()).t()
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def _row_major_on_cpu(weight: torch.Tensor) -> bool:
    return weight.device.type == "cpu" and weight.is_contiguous()


def _use_small_batch_linear(model: nn.Module) -> None:
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = SmallBatchLinear  # same parameters, tied weights stay tied


def lay_out_wide_weights(model: nn.Module) -> None:
    """Store wide CPU weights (more outputs than inputs: the MLP's gate and up projections,
    the LM head) column-major. Same values; for the one-row product of a decode step CPU
    BLAS streams this layout about 1.5x faster, and long prefills run as fast as before."""
    for module in model.modules():
        if not isinstance(module, nn.Linear):
            continue
        if module.out_features > module.in_features and _row_major_on_cpu(module.weight):
            module.weight.data = module.weight.data.t().contiguous().t()


class ModelRunner:
    def __init__(self, model: PreTrainedModel, name: str = "") -> None:
        self.model = model.eval()
        _use_small_batch_linear(model)
        lay_out_wide_weights(model)
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.config = model.config
        self.forward_calls = 0  # counted for tests: "no token computed past a pause"
        self.tokens_forwarded = 0
        self.live_attention_supported = self._use_recording_attention()
        self.fingerprint = model_fingerprint(model)

    # ---- shapes -------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return int(self.config.get_text_config().num_hidden_layers)

    @property
    def vocab_size(self) -> int:
        return int(self._head().weight.shape[0])

    @property
    def dtype(self) -> torch.dtype:
        dtype: torch.dtype = self.model.dtype  # transformers declares it untyped
        return dtype

    def _head(self) -> nn.Linear:
        """The LM head: last-layer hidden states [N, H] -> logits [N, V]."""
        head = self.model.get_output_embeddings()
        if not isinstance(head, nn.Linear):
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
        input_ids = torch.tensor([ids], dtype=torch.long)
        with self._last_hidden(hidden) as caught:
            out = self.model(
                input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=keep
            )
        logits = out.logits[0, -keep:].float()  # [keep, V]
        states = caught[0][0, -keep:].float() if hidden else None
        return StepOutput(logits, states)

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
        with self._last_hidden() as caught:
            out = self.model(
                input_ids=torch.tensor([ids], dtype=torch.long),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        states = caught[0][0].float()  # [N, H]
        return StepOutput(out.logits[0, -1:].float(), states[-1:]), states

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
        logits: torch.Tensor = head(states.to(head.weight.dtype))  # nn.Module calls are untyped
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
        the original last position back so the frozen state is untouched bit for bit.
        """
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
        global _recorder
        if not self.live_attention_supported:
            raise RuntimeError(f"live attention needs sdpa attention; {self.name} uses another")
        previous, _recorder = _recorder, AttentionRecorder(layers)
        try:
            yield _recorder
        finally:
            _recorder = previous

    def _use_recording_attention(self) -> bool:
        if self.config._attn_implementation != "sdpa":
            return False
        self.model.set_attn_implementation(ENGINE_ATTENTION)
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
    return digest.hexdigest()[:32]
