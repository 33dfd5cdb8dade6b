"""The writer of snapshot format version 1, kept as it was when that version was current,
so the tests can check that snapshots written then still restore."""

from __future__ import annotations

import hashlib
import json
import struct

import torch

MAGIC = b"CAESURA\x00"
PREFIX = struct.Struct("<8sII")


def dumps_v1(state, runner, **extra_state) -> bytes:
    """Version 1 bytes of ``state``; ``extra_state`` adds keys to the header's state (fields
    that older builds wrote and this one ignores)."""
    tensors = []
    for i, (keys, values) in enumerate(runner.cache_tensors(state.cache)):
        tensors += [(f"k{i}", keys), (f"v{i}", values)]
    tensors.append(("next_logits", state.next_logits))
    if state.prompt_hidden is not None:
        tensors.append(("prompt_hidden", state.prompt_hidden))
    header = {
        "format_version": 1,
        "model_fingerprint": runner.fingerprint,
        "model_name": runner.name,
        "dtype": _dtype_name(runner.dtype),
        "tensors": [
            {"name": n, "dtype": _dtype_name(t.dtype), "shape": list(t.shape)} for n, t in tensors
        ],
        "state": {**state.summary(), **extra_state},
        "detok": state.detok.to_dict(),
    }
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    parts = [PREFIX.pack(MAGIC, 1, len(header_bytes)), header_bytes]
    parts += [_raw(t) for _, t in tensors]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
