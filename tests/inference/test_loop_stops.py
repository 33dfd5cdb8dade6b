"""A serving loop that stops (closed, or its engine failed) answers every caller: a call,
a read in slices or a run queued before the stop gets an error, never a wait for ever. (A
Celery task waiting for ever would keep its worker from shutting down, and with it the
liveness lock that lets other workers take its sessions over.)"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from inference.decode import RunRequest
from inference.serving import ServingLoop
from inference.sink import CollectingSink

PARAMS = {"temperature": 0.0, "max_new_tokens": 200}


class StallingEngine:
    """An engine whose step waits for the test, then fails (the backend itself broke)."""

    def __init__(self, engine) -> None:
        self.inner, self.active = engine, {}
        self.stepping, self.fail = threading.Event(), threading.Event()

    def submit(self, state, *args):
        run = self.inner.submit(state, *args)
        self.active = self.inner.active
        return run

    def step(self):
        self.stepping.set()
        self.fail.wait(10)
        raise MemoryError("the engine ran out of memory")


def one_slice(_engine):
    yield
    return "read"


def queued_meanwhile(loop: ServingLoop, pool: ThreadPoolExecutor, state) -> list[Future]:
    """A call, a read in slices and a new run, each queued while the loop is busy."""
    return [
        pool.submit(loop.call, lambda _engine: "called"),
        pool.submit(loop.call_in_slices, one_slice),
        loop.submit(state, RunRequest(CollectingSink())),
    ]


def test_it_answers_the_calls_queued_when_its_engine_fails(engine):
    stalling, failures = StallingEngine(engine), []
    loop = ServingLoop(stalling, on_failure=failures.append)
    pool = ThreadPoolExecutor(2)
    try:
        running = loop.submit(engine.start("alpha beta", PARAMS))
        assert stalling.stepping.wait(10)
        waiting = queued_meanwhile(loop, pool, engine.start("gamma delta", PARAMS))
        stalling.fail.set()
        for future in [running, *waiting]:
            with pytest.raises(MemoryError):
                future.result(timeout=10)
        assert [type(f) for f in failures] == [MemoryError]
    finally:
        stalling.fail.set()
        engine.active.clear()
        loop.close()
        pool.shutdown()


def test_closing_it_answers_the_queued_calls_and_the_runs_in_progress(engine):
    loop, pool = ServingLoop(engine), ThreadPoolExecutor(3)
    busy, release = threading.Event(), threading.Event()

    def hold(_engine):
        busy.set()
        release.wait(10)
        return "held"

    try:
        running = loop.submit(engine.start("alpha beta", PARAMS))
        holding = pool.submit(loop.call, hold)
        assert busy.wait(10)
        waiting = queued_meanwhile(loop, pool, engine.start("gamma delta", PARAMS))
        closing = threading.Thread(target=loop.close)
        closing.start()
        for future in waiting:  # answered while the loop is still busy, not after
            with pytest.raises(RuntimeError, match="stopped"):
                future.result(timeout=10)
        release.set()
        closing.join(10)
        assert holding.result(timeout=10) == "held"
        with pytest.raises(RuntimeError, match="stopped"):
            running.result(timeout=10)
        with pytest.raises(RuntimeError, match="stopped"):
            loop.call(lambda _engine: None)
    finally:
        release.set()
        engine.active.clear()
        pool.shutdown()
