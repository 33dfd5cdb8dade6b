"""The compiled decode step: ``step_graph.decode_step`` under ``torch.compile`` over the static
KV cache (``kv_cache.pin``), for Llama-architecture models (the default model among them).

One graph for every cache capacity (a power of two, see ``kv_cache.bucket``), compiled when
the engine loads (``warm_up``) so that no session waits for a compile. Inductor keeps what it
compiled under $CAESURA_DATA_DIR/compiled: only the first start on a machine pays the full
compile; later ones load it. On a GPU the same graph is captured as a CUDA graph
("reduce-overhead"): a step is one replay, and the pause check runs between two replays.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import torch
from transformers import DynamicCache, PreTrainedModel

from inference.progress import progress
from inference.transformers_backend import kv_cache
from inference.transformers_backend.int8 import Int8Linear
from inference.transformers_backend.step_graph import Dims, Linear, StepOut, Weights, decode_step

log = logging.getLogger(__name__)

# On a CPU the step runs as one C++ function that lets go of the GIL (inductor's Python
# wrapper calls each kernel holding it): during a step the worker's other threads (the flag
# watcher, the relays writing tokens and pauses) run on, so a pause is read while the step
# in progress computes, not after it.
CPU_OPTIONS: dict[str, str | int | bool | Callable[..., Any]] = {"cpp_wrapper": True}


def unsupported(model: PreTrainedModel) -> str | None:
    """Why the compiled step cannot run ``model``, or None when it can."""
    config = model.config
    if config.model_type != "llama":
        return f"the compiled step knows Llama models, not {config.model_type!r}"
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) > 1:
        return "the compiled step needs a SiLU MLP without tensor-parallel slices"
    if (getattr(config, "rope_parameters", None) or {}).get("rope_type") == "dynamic":
        return "dynamic RoPE depends on the length: the compiled step has fixed tables"
    return None


class CompiledStep:
    """One token through the model as one compiled graph, for caches it covers."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.weights, self.dims = graph_inputs(model)
        self.device = model.device
        self.limit = int(model.config.max_position_embeddings)  # positions the tables cover
        cuda = self.device.type == "cuda"
        if cuda:  # a CUDA graph reads the weights where they are instead of copying them in
            for tensor in torch.utils._pytree.tree_leaves(self.weights):
                torch._dynamo.mark_static_address(tensor)
        # One graph for every capacity (the cache's capacity is its one dynamic size), so a
        # start compiles, or loads, a single graph. On a GPU a replay per capacity is recorded.
        self._graph: Callable[..., StepOut] = torch.compile(
            decode_step,
            fullgraph=True,
            mode="reduce-overhead" if cuda else None,
            options=None if cuda else CPU_OPTIONS,
        )

    def covers(self, cache: DynamicCache) -> bool:
        """Whether the next token of ``cache`` can take the compiled step."""
        return kv_cache.pinnable(cache) and cache.get_seq_length() < self.limit

    def __call__(self, token: int, cache: DynamicCache) -> StepOut:
        """Run ``token`` after what ``cache`` covers; the cache grows by one position."""
        position = cache.get_seq_length()
        block = kv_cache.pin(cache, kv_cache.bucket(position + 1))
        out = self._run(block, token, position)
        if self.device.type == "cuda":  # a replay overwrites the graph's outputs
            out = StepOut(*(t.clone() for t in out))
        kv_cache.append_pinned(cache, out.new_kv)
        return out

    def _run(self, block: torch.Tensor, token: int, position: int) -> StepOut:
        torch._dynamo.mark_dynamic(block, 4)  # the capacity, [L, 2, 1, H_kv, C, D]
        # Every other size stays fixed, even when another model's graph is compiled in this
        # process (tests load several): no size is made dynamic behind our back.
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            return self._graph(
                self.weights,
                self.dims,
                block,
                torch.tensor([token], device=self.device),
                torch.tensor([position], device=self.device),
            )

    @torch.inference_mode()
    def warm_up(self) -> None:
        """Compile the graph now (or load it from the disk cache), saying so in the log."""
        dims, capacity = self.dims, kv_cache.MIN_CAPACITY
        with progress("compiling the decode step (the first start on a machine only)"):
            block = self.weights.embed.new_zeros(
                (len(self.weights.layers), 2, 1, dims.kv_heads, capacity, dims.head_dim)
            )
            self._run(block, 0, capacity // 2)


# ---- the graph's inputs -----------------------------------------------------------------
def graph_inputs(model: PreTrainedModel) -> tuple[Weights, Dims]:
    """The model's weights as plain tensors (shared, not copied) and its dimensions."""
    config, base = model.config, cast(Any, model.base_model)  # Llama's modules, untyped
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    with torch.inference_mode():
        positions = torch.arange(config.max_position_embeddings, device=model.device)[None]
        cos, sin = base.rotary_emb(base.embed_tokens.weight[:1], positions)  # [1, P, D]
    layers = [
        {
            "input_norm": _plain(layer.input_layernorm.weight),
            "post_norm": _plain(layer.post_attention_layernorm.weight),
            **{name: _linear(getattr(layer.self_attn, f"{name}_proj")) for name in "qkvo"},
            **{
                name: _linear(getattr(layer.mlp, f"{name}_proj")) for name in ("gate", "up", "down")
            },
        }
        for layer in base.layers
    ]
    weights = Weights(
        embed=_plain(base.embed_tokens.weight),
        layers=layers,
        norm=_plain(base.norm.weight),
        head=_linear(model.get_output_embeddings()),
        cos=cos[0].contiguous(),
        sin=sin[0].contiguous(),
    )
    dims = Dims(
        heads=config.num_attention_heads,
        kv_heads=config.num_key_value_heads,
        head_dim=head_dim,
        eps=float(config.rms_norm_eps),
        scaling=float(base.layers[0].self_attn.scaling),
    )
    return weights, dims


def _linear(module: Any) -> Linear:
    """A linear layer's tensors: an int8 one's quantized weight and scales, else its weight."""
    found: Linear
    if isinstance(module, Int8Linear):
        found = {"q": module.int8_weight, "s": module.int8_scales}
    else:
        found = {"w": _plain(module.weight).contiguous()}  # rows in memory order
    if module.bias is not None:
        found["b"] = _plain(module.bias)
    return found


def _plain(param: torch.Tensor) -> torch.Tensor:
    """The same memory as a plain tensor: the graph guards on shapes, not on parameters."""
    return param.detach()
