"""Snapshots: exact round trip, another process, and refusal of anything suspicious."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inference.decode import RunRequest
from inference.snapshot import (
    SnapshotChecksumError,
    SnapshotError,
    SnapshotFormatError,
    SnapshotModelError,
    SnapshotVersionError,
)

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
def test_it_refuses_truncated_bytes(engine, paused, keep):
    data = engine.snapshot(paused)
    with pytest.raises(SnapshotError, match="truncated|corrupted"):
        engine.restore(data[:keep])


@pytest.mark.parametrize("where", [20, 0.5, -40])
def test_it_refuses_a_corrupted_byte(engine, paused, where):
    data = bytearray(engine.snapshot(paused))
    i = int(len(data) * where) if isinstance(where, float) else where
    data[i] ^= 0x01
    with pytest.raises(SnapshotChecksumError, match="checksum"):
        engine.restore(bytes(data))


def test_it_refuses_bytes_that_are_not_a_snapshot(engine):
    with pytest.raises(SnapshotFormatError, match="not a Caesura snapshot"):
        engine.restore(b"PK\x03\x04" + bytes(200))
