"""The serving benchmark keeps running: its quick mode, vLLM only (it needs vLLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_it_prints_one_json_object_in_the_promised_shape():
    pytest.importorskip("vllm", reason="vLLM is not installed (requirements-vllm.txt)")
    done = subprocess.run(
        [sys.executable, "bench/serving.py", "--quick", "--backends=vllm"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # vLLM's own logging must not reach stdout
    vllm = report["vllm"]
    assert set(vllm["aggregate_tok_s"]) == {"1", "2"}
    assert all(v > 0 for v in vllm["aggregate_tok_s"].values())
    assert 0 < vllm["pause_latency_ms"]["p50"] <= vllm["pause_latency_ms"]["p95"]
    assert vllm["step_ms"] > 0
    assert set(vllm["resume_96"]) == {"prefix_cache_s", "prefix_step_s", "cold_prefill_s"}
    assert report["setup"]["quick"] is True
