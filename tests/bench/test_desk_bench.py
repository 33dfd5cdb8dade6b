"""The desk benchmark keeps running: its quick mode end to end, on the real stack it starts
itself (daphne, a Celery worker, a database of its own that it drops at the end), with
chromium and websocket watchers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.test_gateway_bench import bench_databases

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.browser]


def test_it_prints_the_promised_shape_and_drops_its_database():
    before = bench_databases()
    done = subprocess.run(
        # Two rounds of watchers: the second runs the watched generation first
        [sys.executable, "bench/desk.py", "--quick", "--rounds=2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # the servers' and the browser's logging stay off stdout
    for n in map(str, report["setup"]["concurrency"]):
        for key in ("panel_ms", "status_ms", "halt_minus_step_ms"):
            figures = report[key][n]
            assert figures["n"] >= 1 and figures["p50"] <= figures["p95"], (key, n, figures)
        assert report["panel_ms"][n]["p50"] > 0 and report["status_ms"][n]["p50"] > 0
        assert report["load"][f"pauses_{n}"]["cpu_share"]["worker"] > 0
        slowest = report["halt_stages_ms"][n]["slowest"]  # whole paths, the slowest last
        assert 1 <= len(slowest) <= 3 and all("previous_step_ms" in p for p in slowest)
    watchers = report["watchers"]
    assert watchers["clients"] == 20
    assert 0 < watchers["delay_ms"]["p50"] <= watchers["delay_ms"]["p95"]
    assert watchers["tok_s_ratio"] > 0 and len(watchers["pair_ratios"]) == 2
    assert watchers["complete_in_order"] is True  # nothing dropped, nothing reordered
    assert isinstance(report["targets"]["all"], bool)
    assert report["setup"]["quick"] is True
    assert bench_databases() == before


def test_a_p95_of_zero_is_within_its_target_and_a_missing_one_is_not():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import desk
    finally:
        sys.path.remove(str(ROOT / "bench"))
    figures = {"p50": -20.0, "p95": 0.0, "n": 20}
    report = {
        "panel_ms": {"1": {"p50": 100.0, "p95": 200.0, "n": 10}},
        "status_ms": {"1": {"p50": None, "p95": None, "n": 0}},
        "halt_minus_step_ms": {"1": figures},
    }
    met = desk.targets(report)
    assert met["halt_minus_step_p95_1_within_20ms"] and met["panel_p95_1_within_300ms"]
    assert not met["status_p95_1_within_250ms"] and not met["all"]


def test_a_p95_is_taken_by_nearest_rank():
    """The value at rank ceil(0.95 n): over 20 pauses the 19th, not (as before) the slowest."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import desk_clients
    finally:
        sys.path.remove(str(ROOT / "bench"))
    twenty = [float(v) for v in range(20, 0, -1)]
    assert desk_clients.percentiles(twenty) == {"p50": 10.5, "p95": 19.0, "n": 20}
    assert desk_clients.percentiles([3.0, 1.0, 4.0, 2.0])["p95"] == 4.0  # few: the largest
    assert desk_clients.percentiles([7.0])["p95"] == 7.0
