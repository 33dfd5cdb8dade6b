"""The engine benchmark keeps running: its quick mode end to end on the default model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.model, pytest.mark.slow]
PATHS = {"reprefill_s", "memory_s", "bytes_s", "vault_s", "rebuild_s"}


# A first run compiles the float and the int8 step: minutes on 2 cores, over ten on a busy
# machine (pytest's own limit, 600 s, once ended the run mid-compile).
FIRST_RUN_S = 1500


@pytest.mark.timeout(FIRST_RUN_S + 60)
def test_it_prints_every_figure_the_benchmark_promises():
    done = subprocess.run(
        [sys.executable, "bench/engine.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=FIRST_RUN_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report["decode_tok_s"]) == {"engine", "generate", "compiled", "int8"}
    assert all(v > 0 for v in report["decode_tok_s"].values())
    assert 0 <= report["int8_top1_agreement"] <= 1
    assert report["decode_detail"]["compiled_same_tokens_as_engine"] is True
    assert isinstance(report["compiled_live_attention_overhead_fraction"], float)
    assert report["decode_detail"]["same_tokens_as_generate"] is True
    assert 0 < report["policy_overhead_fraction"] < 1
    assert isinstance(report["live_attention_overhead_fraction"], float)
    similarity = report["similarity_overhead_fraction"]
    assert set(similarity) == {"decode", "decode_with_live_mean", "start_48"}
    assert all(isinstance(v, float) for v in similarity.values())
    assert set(report["resume"]) == {"32", "48", "64"}
    for paths in report["resume"].values():
        assert set(paths) == PATHS and all(v > 0 for v in paths.values())
    assert set(report["tail_edit_48"]) == {"edit_resume_s", "reprefill_s"}
    snapshot = report["snapshot"]
    assert snapshot["bytes_per_token"] > 40_000  # 30 layers x 2 x 3 heads x 64 x 4 bytes
    assert snapshot["write_mb_s"] > 0 and snapshot["read_mb_s"] > 0
    assert report["setup"]["quick"] is True


def test_the_gating_row_runs_alone_and_reports_its_figures():
    done = subprocess.run(
        [sys.executable, "bench/engine.py", "--only", "gating", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    row = report["gating_128"]  # gating_2048 in the full run
    assert {"full_step_ms", "gated_step_ms"} <= set(row) and row["gated_step_ms"] > 0
    for fraction in ("top1_agreement", "attention_mass_kept", "anchors_kept"):
        assert 0 <= row[fraction] <= 1
    assert row["anchors_kept"] == 1.0
    assert report["gated_speedup"] > 0 and 0 < report["gate_memory_fraction"] <= 0.05
