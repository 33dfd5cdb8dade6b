"""The gateway benchmark keeps running: its quick mode end to end, on the real stack it
starts itself (daphne, a Celery worker, a database of its own that it drops at the end)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.model, pytest.mark.slow]


def bench_databases() -> set[str]:
    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    url = f"postgres://{db.get('USER') or 'postgres'}@{host}:{port}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database").fetchall()
    return {name for (name,) in rows if "_bench_" in name}


def test_it_prints_the_promised_shape_and_drops_its_database():
    before = bench_databases()
    done = subprocess.run(
        # Two rounds: the second runs the loop first, over the first round's generations
        [sys.executable, "bench/gateway.py", "--quick", "--rounds=2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # the servers' and SDK's logging must not reach stdout
    for n in ("1", "2"):
        figures = report[n]
        assert figures["gateway_tok_s"] > 0 and figures["loop_tok_s"] > 0
        for key in ("gateway_ttft_ms", "loop_ttft_ms", "loop_release_ms"):
            assert 0 < figures[key]["p50"] <= figures[key]["p95"]
        # The loop ran the very generations the worker did, before or after them
        assert figures["same_text"] is True
        assert len(figures["round_ratios"]) == 2 and all(r > 0 for r in figures["round_ratios"])
        assert set(report["ratios"][n]) >= {"tok_s", "tok_s_of_medians", "added_ttft_p95_ms"}
        assert min(figures["round_ratios"]) <= report["ratios"][n]["tok_s"]
        assert report["ratios"][n]["tok_s"] <= max(figures["round_ratios"])
    assert report["delay_sentences"] == 1
    assert 0 < report["queue_visible_ms"]["p50"] <= report["queue_visible_ms"]["p95"]
    assert isinstance(report["targets"]["all"], bool)
    assert report["setup"]["quick"] is True
    assert bench_databases() == before
