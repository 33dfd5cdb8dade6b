"""A worker whose engine cannot load says why and exits non-zero at start: it never takes
work, and /healthz does not count it."""

from __future__ import annotations

import logging
import time

import pytest
import redis
from celery.exceptions import WorkerShutdown

from inference.loader import ModelNotFoundError
from reviewer.web import health
from reviewer.worker import tasks
from tests.conftest import REPO, start_worker, stop_process


def consumer(hostname: str):
    return type("Consumer", (), {"hostname": hostname})()


def test_a_load_failure_at_start_stops_the_worker_non_zero(monkeypatch, caplog, settings):
    steps: list[str] = []
    monkeypatch.setattr(tasks.heartbeat, "start", lambda host: steps.append("heartbeat"))

    def loading_model(host, load):
        raise ModelNotFoundError("no model at /nowhere (config.json missing)")

    monkeypatch.setattr(tasks.heartbeat, "loading_model", loading_model)
    monkeypatch.setattr(tasks.heartbeat, "stop", lambda host: steps.append(f"stop {host}"))
    monkeypatch.setattr(tasks, "freeze_startup_objects", lambda: steps.append("freeze"))
    monkeypatch.setattr(tasks.metrics, "serve_worker_metrics", lambda: steps.append("metrics"))
    with caplog.at_level(logging.CRITICAL), pytest.raises(WorkerShutdown) as stopped:
        tasks.on_worker_ready(consumer("w-fix2@host"))
    assert stopped.value.code == 1  # the worker's exit status
    assert steps == ["heartbeat", "stop w-fix2@host"]  # taken down; no metrics, no work
    critical = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical and "no model at /nowhere" in critical[0].getMessage()
    assert "ModelNotFoundError" in critical[0].getMessage()


def test_a_redis_outage_does_not_keep_the_worker_from_stopping(monkeypatch):
    monkeypatch.setattr(tasks.heartbeat, "start", lambda host: None)
    monkeypatch.setattr(
        tasks.heartbeat,
        "loading_model",
        lambda host, load: (_ for _ in ()).throw(ValueError("CAESURA_WEIGHTS='int4'")),
    )

    def stop(host):
        raise redis.exceptions.ConnectionError("Redis is away")

    monkeypatch.setattr(tasks.heartbeat, "stop", stop)
    with pytest.raises(WorkerShutdown):
        tasks.on_worker_ready(consumer("w-fix2@host"))


def test_a_loaded_engine_starts_as_before(monkeypatch):
    steps: list[str] = []
    monkeypatch.setattr(tasks.heartbeat, "start", lambda host: steps.append("heartbeat"))
    monkeypatch.setattr(tasks.heartbeat, "loading_model", lambda host, load: steps.append("load"))
    monkeypatch.setattr(tasks, "freeze_startup_objects", lambda: steps.append("freeze"))
    monkeypatch.setattr(tasks.metrics, "serve_worker_metrics", lambda: steps.append("metrics"))
    tasks.on_worker_ready(consumer("w-fix2@host"))
    assert steps == ["heartbeat", "load", "freeze", "metrics"]


def test_the_alive_key_goes_when_the_worker_has_shut_down(settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = health.alive_key("ending-fix2@host")
    client.set(key, 1, ex=health.ALIVE_TTL_S)
    try:
        tasks.on_worker_shutdown(type("WorkController", (), {"hostname": "ending-fix2@host"})())
        assert not client.exists(key)
    finally:
        client.delete(key)


@pytest.mark.slow  # starts a real Celery worker process
def test_a_real_worker_without_a_model_exits_non_zero_and_is_not_counted(
    tmp_path, django_db_setup, django_db_blocker
):
    empty = tmp_path / "no-model"
    empty.mkdir()
    process, name = start_worker(
        "fix-ops-unloadable", env={"CAESURA_MODEL": str(empty)}, wait=False
    )
    try:
        process.wait(timeout=180)
    finally:
        stop_process(process)
    assert process.returncode not in (None, 0)
    log = (REPO / "var" / "fix-ops-unloadable-worker.log").read_text()
    assert "CRITICAL" in log and "the engine cannot load" in log and str(empty) in log
    assert f"{name} ready." not in log  # it never took work
    deadline = time.monotonic() + 2
    while name in health.alive_workers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in health.alive_workers()  # gone at once, not one TTL later


@pytest.mark.django_db(transaction=True)
def test_a_stopped_beat_announces_the_worker_no_more(monkeypatch, settings):
    from reviewer.worker import heartbeat, liveness

    monkeypatch.setattr(heartbeat, "SWEEP_S", 0.05)
    monkeypatch.setattr(liveness, "_holder", None)
    client = redis.Redis.from_url(settings.REDIS_URL)
    name = "beat-stopped-fix@host"
    thread = heartbeat.start(name)
    try:
        assert client.exists(health.alive_key(name))
        heartbeat.stop(name)
        thread.join(timeout=5)
        assert not thread.is_alive()  # the beat ended with the stop
        time.sleep(0.2)  # four beats' time: none announced it again
        assert not client.exists(health.alive_key(name))
        heartbeat.announce(name)  # nor does a late announcement
        assert not client.exists(health.alive_key(name))
    finally:
        heartbeat.stop(name)
        liveness._close(liveness._holder)  # the lock start took, as the process's end would
        liveness._holder = None
        heartbeat.loading.clear()
