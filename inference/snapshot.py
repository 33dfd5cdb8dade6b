"""Snapshot format: a paused DecodeState as bytes, restorable in another process.

Layout (format version 2):
    MAGIC (8 bytes) | format version (u32 LE) | header length (u32 LE)
    | header (UTF-8 JSON: model fingerprint, dtype, shapes, token ids, params, ...)
    | payload: raw tensors in header order (per layer keys then values, next_logits, ...),
      each starting at a multiple of 64 bytes from the snapshot's first byte (zero padding)
    | checksum: XXH3-128 over everything before it (16 bytes)

Version 1, still read, has no padding and a SHA-256 checksum (32 bytes). The checksum
catches truncation and corruption; authenticity is the vault's (encrypted and
authenticated at rest): a checksum anyone can recompute proves nothing against a forger,
whatever its algorithm, so version 2 takes one that runs at memory speed.

Reading checks the whole checksum first, then views the KV tensors in the caller's buffer
(bytes, bytearray, memoryview, mmap) instead of copying them: the restored cache borrows
them and copies a layer only when it first writes to it (see kv_cache.py).

Restoring refuses, with a SnapshotError subclass, bytes that are not a snapshot, come
from another format version or another model, are truncated or are corrupted.
"""

from __future__ import annotations

import hashlib
import json
import struct
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import xxhash
from typing_extensions import Buffer

from inference.state import Checkpoint, DecodeState
from inference.text import Detokenizer

if TYPE_CHECKING:
    from collections.abc import Callable

    from inference.transformers_backend.runner import ModelRunner

MAGIC = b"CAESURA\x00"
FORMAT_VERSION = 2
ALIGNMENT = 64  # version 2: where tensors start (cache lines; an mmap's pages are aligned too)
_PREFIX = struct.Struct("<8sII")


@dataclass(frozen=True)
class _Version:
    checksum: Callable[[], Any]  # a hashlib-style hasher: update(), digest()
    checksum_bytes: int
    alignment: int  # tensor starts are multiples of this, from the first byte
    views: bool  # tensors are viewed in the buffer (aligned), not copied out


VERSIONS = {
    1: _Version(hashlib.sha256, 32, 1, views=False),
    2: _Version(xxhash.xxh3_128, 16, ALIGNMENT, views=True),
}


class SnapshotError(ValueError):
    """A snapshot cannot be restored; the subclass and message say why."""


class SnapshotFormatError(SnapshotError):
    """Not a snapshot, or truncated."""


class SnapshotVersionError(SnapshotError):
    """Written by another format version."""


class SnapshotChecksumError(SnapshotError):
    """The bytes were altered after writing."""


class SnapshotModelError(SnapshotError):
    """Written for another model: its KV cache means nothing to this one."""


# ---- writing ----------------------------------------------------------------------------
def dumps(state: DecodeState, runner: ModelRunner) -> bytes:
    tensors = _tensors(state, runner)
    header = json.dumps(_header(state, runner, tensors), separators=(",", ":")).encode()
    parts: list[Buffer] = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)), header]
    end = _PREFIX.size + len(header)
    for _, tensor in tensors:
        raw = _raw(tensor)
        padding = -end % ALIGNMENT
        parts += [bytes(padding), raw]
        end += padding + raw.nbytes
    hasher = VERSIONS[FORMAT_VERSION].checksum()
    for part in parts:
        hasher.update(part)
    return b"".join([*parts, hasher.digest()])


def _header(
    state: DecodeState, runner: ModelRunner, tensors: list[tuple[str, torch.Tensor]]
) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "model_fingerprint": runner.fingerprint,
        "model_name": runner.name,
        "dtype": _dtype_name(runner.dtype),
        "tensors": [
            {"name": n, "dtype": _dtype_name(t.dtype), "shape": list(t.shape)} for n, t in tensors
        ],
        "state": state.summary(),
        "detok": state.detok.to_dict(),
    }


def _tensors(state: DecodeState, runner: ModelRunner) -> list[tuple[str, torch.Tensor]]:
    out: list[tuple[str, torch.Tensor]] = []
    for i, (keys, values) in enumerate(runner.cache_tensors(state.cache)):
        out += [(f"k{i}", keys), (f"v{i}", values)]  # each [B, H_kv, S, D]
    out.append(("next_logits", state.next_logits))  # [V]
    if state.prompt_hidden is not None:
        out.append(("prompt_hidden", state.prompt_hidden))  # [H]
    return out


def _raw(t: torch.Tensor) -> memoryview:
    """The tensor's bytes (a copy only when it is not contiguous: a cache's filled part)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- reading ----------------------------------------------------------------------------
def loads(data: Buffer, runner: ModelRunner) -> DecodeState:
    """The state in ``data``; its KV tensors view ``data``, which must not change after."""
    header, offsets = read_header(data, runner.fingerprint)
    version = VERSIONS[_PREFIX.unpack_from(data)[1]]
    tensors = _read_tensors(data, header["tensors"], offsets, version.views)
    return _state(header, tensors, runner, borrowed=version.views)


def read_header(data: Buffer, fingerprint: str | None = None) -> tuple[dict[str, Any], list[int]]:
    """The validated header and each tensor's offset; the checksum covers every byte."""
    view = memoryview(data).cast("B")
    version = _check_version(view)
    body = _checked_body(view, version)
    header_len = _PREFIX.unpack_from(view)[2]
    try:
        header: dict[str, Any] = json.loads(bytes(body[_PREFIX.size : _PREFIX.size + header_len]))
    except ValueError as exc:
        raise SnapshotFormatError(f"snapshot header is unreadable: {exc}") from None
    if fingerprint is not None and header.get("model_fingerprint") != fingerprint:
        raise SnapshotModelError(
            f"snapshot was written for model {header.get('model_name')!r} "
            f"(fingerprint {header.get('model_fingerprint')}), not the loaded model ({fingerprint})"
        )
    return header, _offsets(header, _PREFIX.size + header_len, len(body), version)


def _check_version(view: memoryview) -> _Version:
    if len(view) < _PREFIX.size:
        raise SnapshotFormatError(f"snapshot truncated: {len(view)} bytes is too short")
    magic, number, _ = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        raise SnapshotFormatError("not a Caesura snapshot (bad magic bytes)")
    if number not in VERSIONS:
        raise SnapshotVersionError(
            f"snapshot format version {number} is not supported "
            f"(this build reads {', '.join(map(str, VERSIONS))})"
        )
    return VERSIONS[number]


def _checked_body(view: memoryview, version: _Version) -> memoryview:
    """Everything before the checksum, once the checksum matches it."""
    if len(view) < _PREFIX.size + version.checksum_bytes:
        raise SnapshotFormatError(f"snapshot truncated: {len(view)} bytes is too short")
    body, stored = view[: -version.checksum_bytes], view[-version.checksum_bytes :]
    hasher = version.checksum()
    hasher.update(body)
    if hasher.digest() != stored:
        raise SnapshotChecksumError(
            "snapshot checksum mismatch: the bytes are truncated or corrupted"
        )
    return body


def _offsets(header: dict[str, Any], start: int, end: int, version: _Version) -> list[int]:
    """Where each tensor of the header starts; refuses a payload of another size."""
    offsets, at = [], start
    try:
        for spec in header["tensors"]:
            at += -at % version.alignment
            offsets.append(at)
            at += _nbytes(spec)
    except (KeyError, TypeError) as exc:
        raise SnapshotFormatError(f"snapshot header lacks a tensor's layout: {exc!r}") from None
    if at != end:
        raise SnapshotFormatError(f"snapshot payload ends at byte {end}, its header describes {at}")
    return offsets


def _nbytes(spec: dict[str, Any]) -> int:
    count = 1
    for n in spec["shape"]:
        if not isinstance(n, int) or n < 0:
            raise SnapshotFormatError(f"snapshot tensor {spec['name']!r} has shape {spec['shape']}")
        count *= n
    return count * _dtype(spec["dtype"]).itemsize


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise SnapshotFormatError(f"unknown tensor dtype {name!r} in snapshot")
    return dtype


def _read_tensors(
    data: Buffer, specs: list[dict[str, Any]], offsets: list[int], views: bool
) -> dict[str, torch.Tensor]:
    """Each tensor over ``data`` (a view, or a copy where ``views`` is off: unaligned)."""
    out = {}
    with warnings.catch_warnings():  # a read-only buffer: the cache copies before writing
        warnings.simplefilter("ignore", UserWarning)
        for spec, offset in zip(specs, offsets, strict=True):
            t = _tensor(data, spec, offset)
            out[spec["name"]] = t if views and _aligned(t) else t.clone()
    return out


def _tensor(data: Buffer, spec: dict[str, Any], offset: int) -> torch.Tensor:
    n, dtype = _nbytes(spec), _dtype(spec["dtype"])
    if not n:
        return torch.empty(spec["shape"], dtype=dtype)
    flat = torch.frombuffer(data, dtype=torch.uint8, count=n, offset=offset)
    return flat.view(dtype).reshape(spec["shape"])


def _aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % t.element_size() == 0


def _state(
    header: dict[str, Any], tensors: dict[str, torch.Tensor], runner: ModelRunner, borrowed: bool
) -> DecodeState:
    record = Checkpoint.from_dict(header["state"])  # older headers' extra keys are ignored
    if "k0" not in tensors:  # the vLLM backend keeps its KV in vLLM
        raise SnapshotFormatError(
            "snapshot holds no KV cache (written by the vllm backend): rebuild from its token ids"
        )
    kv = [(tensors[f"k{i}"], tensors[f"v{i}"]) for i in range(runner.num_layers)]
    cache = runner.cache_from_tensors(kv, borrowed)
    detok = Detokenizer.from_dict(record.generated_ids, header["detok"])
    logits = _copied(tensors["next_logits"])  # small: the state's own, never the buffer's
    state = DecodeState.from_checkpoint(record, detok, None, cache, logits)
    hidden = tensors.get("prompt_hidden")
    state.prompt_hidden = _copied(hidden) if hidden is not None else None
    if runner.cache_length(cache) != state.position:
        raise SnapshotFormatError(
            f"snapshot KV covers {runner.cache_length(cache)} positions, token ids {state.position}"
        )
    return state


def _copied(t: torch.Tensor) -> torch.Tensor:
    """A copy of a small tensor made on this thread (numpy's memcpy): torch's clone hands even
    200 KB to its thread pool, whose wake-up took milliseconds on a busy 2-core machine."""
    raw = t.reshape(-1).view(torch.uint8).numpy().copy()
    return torch.from_numpy(raw).view(t.dtype).reshape(t.shape)
