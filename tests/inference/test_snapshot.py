"""Snapshots: exact round trip, another process, the KV read without copies, snapshots
of the former format version, and refusal of anything suspicious."""

from __future__ import annotations

import hashlib
import json
import mmap
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import xxhash

from inference.decode import RunRequest
from inference.snapshot import (
    ALIGNMENT,
    FORMAT_VERSION,
    SnapshotChecksumError,
    SnapshotError,
    SnapshotFormatError,
    SnapshotModelError,
    SnapshotVersionError,
    read_header,
)
from tests.inference.snapshot_v1 import dumps_v1

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "The contract is void."
PARAMS = {"temperature": 0.7, "seed": 3, "max_new_tokens": 20}
POLICIES = [
    {"name": "unsure", "kind": "low_confidence", "action": "flag", "params": {"threshold": 0.3}}
]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def paused(engine):
    state = engine.start(PROMPT, PARAMS, POLICIES)
    engine.run(state, RunRequest(pause_at=8))
    return state


@pytest.fixture(params=["current", "version 1"])
def written(request, engine, paused) -> bytes:
    """The paused state's snapshot, in the current format and as the former writer wrote it."""
    if request.param == "current":
        return engine.snapshot(paused)
    return dumps_v1(paused, engine.runner)


def test_it_restores_every_tensor_and_field_exactly(engine, paused):
    restored = engine.restore(engine.snapshot(paused))
    assert restored.summary() == paused.summary()
    assert torch.equal(restored.next_logits, paused.next_logits)
    for a, b in zip(restored.cache.layers, paused.cache.layers, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


@pytest.mark.slow  # starts another Python process
def test_it_is_restored_in_another_process(engine, paused, tmp_path):
    (tmp_path / "state.bin").write_bytes(engine.snapshot(paused))
    script = (
        "import sys, json\n"
        "from inference.transformers_backend.engine import Engine\nfrom inference.transformers_backend.runner import ModelRunner\n"
        "from tests.inference.tiny import tiny_model, tiny_tokenizer\n"
        "tok = tiny_tokenizer()\n"
        "engine = Engine(ModelRunner(tiny_model(len(tok))), tok)\n"
        "state = engine.restore(open(sys.argv[1], 'rb').read())\n"
        "engine.run(state)\nprint(json.dumps(state.generated_ids))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "state.bin")],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    engine.run(paused)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == paused.generated_ids


def test_it_refuses_a_snapshot_of_another_model(engine, other_engine, paused):
    with pytest.raises(SnapshotModelError, match="written for model"):
        other_engine.restore(engine.snapshot(paused))


def test_it_refuses_another_format_version(engine, paused):
    data = bytearray(engine.snapshot(paused))
    struct.pack_into("<I", data, 8, 99)
    with pytest.raises(SnapshotVersionError, match="version 99"):
        engine.restore(bytes(data))


@pytest.mark.parametrize("keep", [0, 10, 100, -1, -33])
def test_it_refuses_truncated_bytes(engine, written, keep):
    with pytest.raises(SnapshotError, match="truncated|corrupted"):
        engine.restore(written[:keep])


@pytest.mark.parametrize("where", [20, 0.5, -40, -1])
def test_it_refuses_a_corrupted_byte(engine, written, where):
    data = bytearray(written)
    i = int(len(data) * where) if isinstance(where, float) else where
    data[i] ^= 0x01
    with pytest.raises(SnapshotChecksumError, match="checksum"):
        engine.restore(bytes(data))


def test_it_refuses_bytes_that_are_not_a_snapshot(engine):
    with pytest.raises(SnapshotFormatError, match="not a Caesura snapshot"):
        engine.restore(b"PK\x03\x04" + bytes(200))


# ---- format version 2: aligned tensors, viewed where they lie --------------------------
def test_it_writes_the_current_version_with_every_tensor_aligned(engine, paused):
    data = engine.snapshot(paused)
    header, offsets = read_header(data)
    assert struct.unpack_from("<I", data, 8)[0] == header["format_version"] == FORMAT_VERSION == 2
    assert len(offsets) == len(header["tensors"]) and all(o % ALIGNMENT == 0 for o in offsets)


def test_it_views_the_kv_in_the_snapshot_instead_of_copying_it(engine, paused):
    data = bytearray(engine.snapshot(paused))
    start = torch.frombuffer(data, dtype=torch.uint8).data_ptr()
    restored = engine.restore(data)
    for layer in restored.cache.layers:
        for t in (layer.keys, layer.values):
            assert start <= t.data_ptr() < start + len(data)
    engine.run(restored, RunRequest(pause_at=10))  # a write moves each layer to its own buffer
    assert all(
        not start <= layer.keys.data_ptr() < start + len(data) for layer in restored.cache.layers
    )


def test_it_never_writes_into_the_bytes_it_restored_from(engine, paused):
    data = engine.snapshot(paused)
    digest = hashlib.sha256(data).digest()
    first = engine.restore(data)
    engine.attention(first)  # re-runs the last position in place
    engine.truncate(first, 3)  # then writes new keys over positions the snapshot holds
    engine.run(first)
    assert hashlib.sha256(data).digest() == digest
    second = engine.restore(data)
    engine.run(second)
    engine.run(paused)
    assert second.generated_ids == paused.generated_ids


def test_it_restores_from_a_read_only_map_of_a_file(engine, paused, tmp_path):
    path = tmp_path / "state.snap"
    path.write_bytes(engine.snapshot(paused))
    with path.open("rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    restored = engine.restore(mapped)
    engine.run(restored)
    engine.run(paused)
    assert restored.generated_ids == paused.generated_ids


def test_it_refuses_a_header_that_describes_another_payload(engine, paused):
    data = engine.snapshot(paused)
    header, offsets = read_header(data)
    header["tensors"][0]["shape"][2] += 1  # one position more than the bytes hold
    with pytest.raises(SnapshotFormatError, match="header describes"):
        engine.restore(_resealed(data, header, offsets[0]))


@pytest.mark.parametrize("damage", ["no tensors", "negative shape", "shape of text"])
def test_it_refuses_a_header_without_a_sound_layout(engine, paused, damage):
    data = engine.snapshot(paused)
    header, offsets = read_header(data)
    if damage == "no tensors":
        del header["tensors"]
    else:
        header["tensors"][0]["shape"][0] = -1 if damage == "negative shape" else "1"
    with pytest.raises(SnapshotFormatError, match="layout|shape"):
        engine.restore(_resealed(data, header, offsets[0]))


def _resealed(data: bytes, header: dict, payload_at: int) -> bytes:
    """``data`` with another header, laid out and checksummed as the writer would."""
    encoded = json.dumps(header).encode()
    body = struct.pack("<8sII", data[:8], FORMAT_VERSION, len(encoded)) + encoded
    body += bytes(-len(body) % ALIGNMENT) + data[payload_at:-16]
    return body + xxhash.xxh3_128_digest(body)


# ---- format version 1, as the former writer wrote it -----------------------------------
def test_it_restores_a_version_1_snapshot_exactly(engine, paused):
    restored = engine.restore(dumps_v1(paused, engine.runner))
    assert restored.summary() == paused.summary()
    assert torch.equal(restored.next_logits, paused.next_logits)
    for a, b in zip(restored.cache.layers, paused.cache.layers, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    engine.run(restored)
    engine.run(paused)
    assert restored.generated_ids == paused.generated_ids
