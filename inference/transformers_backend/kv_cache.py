"""The KV cache: transformers' DynamicCache whose layers append in place.

A DynamicLayer appends a token with torch.cat, which copies the whole layer cache on every
step: about a fifth of a decode step at 1,024 tokens on CPU, growing with the context. Here
each layer keeps its keys and values in a buffer with spare room and exposes views of the
filled part, so a token is one small write; the buffer doubles when full.

A restored cache may borrow its buffers: views of a snapshot's bytes, which the cache must
never write (they may be immutable, or shared by other restores). The first write to a
borrowed layer copies it into a buffer of its own with room to grow, the copy that a full
buffer's growth would make anyway.

The compiled decode step reads the cache as one static tensor (``pin``): every layer's
buffers become views of a [L, 2, B, H_kv, C, D] block whose capacity C is a bucket of the
position, so crops, edits and rollbacks only move the filled length and the same shapes
come back to the same compiled graph.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache, PretrainedConfig
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 256  # positions reserved at first use


class GrowingLayer(DynamicLayer):
    """``keys``/``values`` are views ``[B, H, :length, D]`` of larger buffers."""

    _borrowed = False  # the buffers belong to someone else: copy before the first write

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._set(key_states[..., :0, :].clone(), value_states[..., :0, :].clone(), 0)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if end > self._key_buffer.shape[-2] or self._borrowed:
            self._grow(end)
        self._key_buffer[..., start:end, :].copy_(key_states)
        self._value_buffer[..., start:end, :].copy_(value_states)
        self._expose(end)
        if start == 0:  # a prefill attends over exactly its own (contiguous) keys and values
            return key_states, value_states
        return keys_values(self)

    def get_seq_length(self) -> int:
        return self._length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        """As DynamicLayer.crop: a negative count drops that many positions, a positive one
        (transformers' older form) is the length to keep. The buffer keeps its room."""
        length = self.get_seq_length()
        self.truncate(length + tokens_to_remove if tokens_to_remove < 0 else tokens_to_remove)

    def truncate(self, length: int) -> None:
        if self.is_initialized and 0 <= length < self._length:
            self._expose(length)

    def assign(self, keys: torch.Tensor, values: torch.Tensor, borrowed: bool = False) -> None:
        """Take ``keys``/``values`` (e.g. restored from a snapshot) as the whole content;
        ``borrowed``: they view memory this layer must not write (see the module's note)."""
        if not self.is_initialized:
            super().lazy_initialization(keys, values)
        self._set(keys, values, keys.shape[-2], borrowed)

    def capacity_bytes(self) -> int:
        if not self.is_initialized:
            return 0
        return sum(t.numel() * t.element_size() for t in (self._key_buffer, self._value_buffer))

    def pinned_to(self, keys: torch.Tensor, values: torch.Tensor) -> bool:
        return self.is_initialized and self._key_buffer is keys and self._value_buffer is values

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self._key_buffer.shape[-2], MIN_CAPACITY)
        keys, values = keys_values(self)
        self._set(_resized(keys, capacity), _resized(values, capacity), self._length)

    def _set(
        self, keys: torch.Tensor, values: torch.Tensor, length: int, borrowed: bool = False
    ) -> None:
        """Make ``keys``/``values`` [B, H_kv, capacity, D] the buffers, ``length`` filled."""
        self._key_buffer, self._value_buffer = keys, values
        self._borrowed = borrowed
        self._expose(length)

    def _expose(self, length: int) -> None:
        self._length = length
        self.keys = self._key_buffer[..., :length, :]
        self.values = self._value_buffer[..., :length, :]


def _resized(filled: torch.Tensor, capacity: int) -> torch.Tensor:
    shape = (*filled.shape[:-2], capacity, filled.shape[-1])
    buffer = filled.new_empty(shape)
    buffer[..., : filled.shape[-2], :].copy_(filled)
    return buffer


def new_cache(config: PretrainedConfig) -> DynamicCache:
    """A DynamicCache for ``config`` with every plain dynamic layer made a GrowingLayer
    (sliding-window and other special layers keep their own class)."""
    cache = DynamicCache(config=config)
    cache.layers = [
        GrowingLayer()  # type: ignore[no-untyped-call]  # transformers' __init__ is unannotated
        if type(la) is DynamicLayer
        else la
        for la in cache.layers
    ]
    return cache


def layers(cache: DynamicCache) -> list[DynamicLayer]:
    """The cache's layers, each holding keys and values (a DynamicLayer, of which a
    GrowingLayer is one). A linear-attention layer's state is no KV cache: refused."""
    found = []
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer):
            raise TypeError(f"unsupported cache layer {type(layer).__name__}: no keys and values")
        found.append(layer)
    return found


def keys_values(layer: DynamicLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """A filled layer's (keys, values), each [B, H_kv, S, D]."""
    if layer.keys is None or layer.values is None:
        raise ValueError("the cache layer holds no keys yet (nothing was run)")
    return layer.keys, layer.values


def truncate(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of every layer."""
    current = cache.get_seq_length()
    if not 0 <= length <= current:
        raise ValueError(f"cannot crop a cache of {current} positions to {length}")
    for layer in layers(cache):
        if isinstance(layer, GrowingLayer):
            layer.truncate(length)
        elif layer.get_seq_length() > length:
            layer.crop(length - layer.get_seq_length())


def tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values), each [B, H_kv, S, D] (views: copy before keeping them)."""
    return [keys_values(layer) for layer in layers(cache)]


def from_tensors(
    config: PretrainedConfig, kv: list[tuple[torch.Tensor, torch.Tensor]], borrowed: bool = False
) -> DynamicCache:
    """A cache holding ``kv``; ``borrowed``: the tensors view memory the cache must not
    write (a snapshot's bytes), so a layer copies them before its first write."""
    cache = new_cache(config)
    for layer, (keys, values) in zip(layers(cache), kv, strict=True):
        if isinstance(layer, GrowingLayer):
            layer.assign(keys, values, borrowed)
        else:  # another layer class may write in place: it gets its own copy
            if borrowed:
                keys, values = keys.clone(), values.clone()
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys, values
    return cache


def nbytes(cache: DynamicCache) -> int:
    """Memory the cache holds, spare room included."""
    total = 0
    for layer in layers(cache):
        if isinstance(layer, GrowingLayer):
            total += layer.capacity_bytes()
        elif layer.is_initialized:
            total += sum(t.numel() * t.element_size() for t in keys_values(layer))
    return total


# ---- the static block a compiled step reads ---------------------------------------------
def bucket(needed: int) -> int:
    """The capacity for ``needed`` positions: the next power of two, at least MIN_CAPACITY.
    A function of the position alone, so a run computes each step over the same shapes
    whatever crops, restores or rebuilds came before."""
    return max(MIN_CAPACITY, 1 << max(0, needed - 1).bit_length())


class Pinned:
    """A cache's layers as views of one block: ``block`` [L, 2, B, H_kv, C, D]."""

    def __init__(self, block: torch.Tensor) -> None:
        self.block = block
        self.views = [(block[i, 0], block[i, 1]) for i in range(block.shape[0])]


def pin(cache: DynamicCache, capacity: int) -> torch.Tensor:
    """The cache as one static block of ``capacity`` positions; the layers' buffers become
    its views (their content copied in) unless they already are."""
    found = _growing_layers(cache)
    pinned: Pinned | None = getattr(cache, "pinned", None)
    if pinned is not None and _holds(pinned, found, capacity):
        return pinned.block
    keys, _ = keys_values(found[0])
    block = keys.new_zeros((len(found), 2, *keys.shape[:2], capacity, keys.shape[-1]))
    pinned = Pinned(block)
    for layer, (key_view, value_view) in zip(found, pinned.views, strict=True):
        length = layer.get_seq_length()
        keys, values = keys_values(layer)
        key_view[..., :length, :].copy_(keys)
        value_view[..., :length, :].copy_(values)
        layer._set(key_view, value_view, length)
    cache.pinned = pinned  # type: ignore[attr-defined]  # kept beside the layers it serves
    return block


def _holds(pinned: Pinned, found: list[GrowingLayer], capacity: int) -> bool:
    """Whether every layer still keeps its content in ``pinned`` (an eager forward that
    outgrew the block moved it) and the block has ``capacity`` positions."""
    views = zip(found, pinned.views, strict=True)
    return pinned.block.shape[4] == capacity and all(la.pinned_to(k, v) for la, (k, v) in views)


def append_pinned(cache: DynamicCache, new_kv: torch.Tensor) -> None:
    """Write one position's keys and values (``new_kv`` [L, 2, B, H_kv, 1, D]) after the filled
    part of a pinned cache."""
    pinned: Pinned = cache.pinned  # type: ignore[attr-defined]
    found = _growing_layers(cache)
    length = found[0].get_seq_length()
    pinned.block[..., length : length + 1, :].copy_(new_kv)
    for layer in found:
        layer._expose(length + 1)


def _growing_layers(cache: DynamicCache) -> list[GrowingLayer]:
    found = [la for la in cache.layers if isinstance(la, GrowingLayer) and la.is_initialized]
    if len(found) != len(cache.layers):
        raise TypeError("only a filled cache of growing layers can be pinned")
    return found


def pinnable(cache: DynamicCache) -> bool:
    """Whether ``pin`` takes this cache: filled growing layers, one sequence."""
    return all(
        isinstance(la, GrowingLayer) and la.is_initialized and la.keys is not None
        and la.keys.shape[0] == 1
        for la in cache.layers
    )  # fmt: skip
