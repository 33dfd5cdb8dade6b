"""Objects made while a process starts are left out of garbage collections (webapp/heap.py):
a full collection would otherwise stop every thread of a worker for about 300 ms."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from reviewer.worker import tasks
from webapp.heap import freeze_startup_objects

REPO = Path(__file__).resolve().parent.parent


def test_it_leaves_what_exists_at_start_out_of_later_collections():
    made_at_start = [object()]  # a tracked container
    try:
        frozen = freeze_startup_objects()
        assert frozen > 0 and gc.get_freeze_count() > 0
        tracked = {id(o) for o in gc.get_objects()}  # the collected generations only
        assert id(made_at_start) not in tracked
        made_later = [object()]
        assert id(made_later) in {id(o) for o in gc.get_objects()}
    finally:
        gc.unfreeze()  # the test process collects as before


def test_the_web_process_freezes_once_its_app_is_built():
    code = "import gc, webapp.asgi; print(gc.get_freeze_count())"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout.strip().splitlines()[-1]) > 10_000


def test_the_worker_freezes_after_the_model_is_loaded(monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(tasks.heartbeat, "start", lambda host: order.append("heartbeat"))
    monkeypatch.setattr(tasks.runtime, "engine", lambda: order.append("model"))
    monkeypatch.setattr(tasks.metrics, "serve_worker_metrics", lambda: order.append("metrics"))
    monkeypatch.setattr(tasks, "freeze_startup_objects", lambda: order.append("freeze"))
    tasks.on_worker_ready(type("Consumer", (), {"hostname": "w1"})())
    assert order.index("freeze") > order.index("model")
