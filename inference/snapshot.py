"""Snapshot format: a paused DecodeState as bytes, restorable in another process.

Layout:
    MAGIC (8 bytes) | format version (u32 LE) | header length (u32 LE)
    | header (UTF-8 JSON: model fingerprint, dtype, shapes, token ids, params, ...)
    | payload (raw tensors, in header order: per layer keys then values, next_logits, ...)
    | sha256 over everything before it (32 bytes)

Restoring refuses, with a SnapshotError subclass, bytes that are not a snapshot, come
from another format version or another model, are truncated or are corrupted.
"""

from __future__ import annotations

import hashlib
import json
import struct
import warnings
from typing import TYPE_CHECKING, Any

import torch

from inference.state import Checkpoint, DecodeState
from inference.text import Detokenizer

if TYPE_CHECKING:
    from inference.transformers_backend.runner import ModelRunner

MAGIC = b"CAESURA\x00"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sII")
_DIGEST = 32


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
    header = {
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
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes]
    parts += [_raw(t) for _, t in tensors]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _tensors(state: DecodeState, runner: ModelRunner) -> list[tuple[str, torch.Tensor]]:
    out: list[tuple[str, torch.Tensor]] = []
    for i, (keys, values) in enumerate(runner.cache_tensors(state.cache)):
        out += [(f"k{i}", keys), (f"v{i}", values)]  # each [B, H_kv, S, D]
    out.append(("next_logits", state.next_logits))  # [V]
    if state.prompt_hidden is not None:
        out.append(("prompt_hidden", state.prompt_hidden))  # [H]
    return out


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- reading ----------------------------------------------------------------------------
def loads(data: bytes, runner: ModelRunner) -> DecodeState:
    header, payload_start = read_header(data, runner.fingerprint)
    tensors = _read_tensors(data, header["tensors"], payload_start)
    return _state(header, tensors, runner)


def read_header(data: bytes, fingerprint: str | None = None) -> tuple[dict[str, Any], int]:
    """Validated header and payload offset; checks everything but the tensors' bytes."""
    if len(data) < _PREFIX.size + _DIGEST:
        raise SnapshotFormatError(f"snapshot truncated: {len(data)} bytes is too short")
    magic, version, header_len = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotFormatError("not a Caesura snapshot (bad magic bytes)")
    if version != FORMAT_VERSION:
        raise SnapshotVersionError(
            f"snapshot format version {version} is not supported (this build reads {FORMAT_VERSION})"
        )
    body, digest = memoryview(data)[:-_DIGEST], bytes(data[-_DIGEST:])
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotChecksumError(
            "snapshot checksum mismatch: the bytes are truncated or corrupted"
        )
    try:
        header: dict[str, Any] = json.loads(bytes(body[_PREFIX.size : _PREFIX.size + header_len]))
    except ValueError as exc:
        raise SnapshotFormatError(f"snapshot header is unreadable: {exc}") from None
    if fingerprint is not None and header.get("model_fingerprint") != fingerprint:
        raise SnapshotModelError(
            f"snapshot was written for model {header.get('model_name')!r} "
            f"(fingerprint {header.get('model_fingerprint')}), not the loaded model ({fingerprint})"
        )
    payload_start = _PREFIX.size + header_len
    expected = sum(_nbytes(t) for t in header["tensors"])
    if payload_start + expected != len(body):
        raise SnapshotFormatError(
            f"snapshot payload is {len(body) - payload_start} bytes, header describes {expected}"
        )
    return header, payload_start


def _nbytes(spec: dict[str, Any]) -> int:
    count = 1
    for n in spec["shape"]:
        count *= n
    return count * _dtype(spec["dtype"]).itemsize


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise SnapshotFormatError(f"unknown tensor dtype {name!r} in snapshot")
    return dtype


def _read_tensors(data: bytes, specs: list[dict[str, Any]], offset: int) -> dict[str, torch.Tensor]:
    out = {}
    with warnings.catch_warnings():  # read-only buffer: we clone before use
        warnings.simplefilter("ignore", UserWarning)
        for spec in specs:
            n, dtype = _nbytes(spec), _dtype(spec["dtype"])
            if n:
                t = torch.frombuffer(data, dtype=torch.uint8, count=n, offset=offset).view(dtype)
            else:
                t = torch.empty(0, dtype=dtype)
            out[spec["name"]] = t.reshape(spec["shape"]).clone()
            offset += n
    return out


def _state(
    header: dict[str, Any], tensors: dict[str, torch.Tensor], runner: ModelRunner
) -> DecodeState:
    record = Checkpoint.from_dict(header["state"])  # older headers' extra keys are ignored
    layers = runner.num_layers
    if "k0" not in tensors:  # the vLLM backend keeps its KV in vLLM
        raise SnapshotFormatError(
            "snapshot holds no KV cache (written by the vllm backend): rebuild from its token ids"
        )
    cache = runner.cache_from_tensors([(tensors[f"k{i}"], tensors[f"v{i}"]) for i in range(layers)])
    detok = Detokenizer.from_dict(record.generated_ids, header["detok"])
    state = DecodeState.from_checkpoint(record, detok, None, cache, tensors["next_logits"])
    state.prompt_hidden = tensors.get("prompt_hidden")
    if runner.cache_length(cache) != state.position:
        raise SnapshotFormatError(
            f"snapshot KV covers {runner.cache_length(cache)} positions, token ids {state.position}"
        )
    return state
