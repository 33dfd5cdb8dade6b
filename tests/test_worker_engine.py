"""The worker's engine is loaded by its serving loop's own thread (inference/serving.py): an
OpenMP pool left in the worker's main thread by loading the model there halved the loop's
decode speed on two cores."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from reviewer.worker import runtime


@pytest.fixture
def fresh_serving():
    runtime.serving.cache_clear()
    yield
    runtime.serving.cache_clear()


def test_it_loads_the_model_in_the_serving_loop_thread(monkeypatch, fresh_serving):
    loaded_in = []

    def load_backend(name, model_dir, record_similarity):
        loaded_in.append((threading.current_thread(), record_similarity))
        return SimpleNamespace(active={})  # idle: the loop only asks whether runs are active

    monkeypatch.setattr(runtime, "load_backend", load_backend)
    loop = runtime.serving()
    try:
        assert loaded_in == [(loop._thread, True)]
        assert loop._thread is not threading.main_thread()
        assert runtime.serving() is loop  # once per process
    finally:
        loop.close()


def test_it_raises_a_model_that_fails_to_load_in_the_caller(monkeypatch, fresh_serving):
    def load_backend(name, model_dir, record_similarity):
        raise FileNotFoundError(f"no model in {model_dir}")

    monkeypatch.setattr(runtime, "load_backend", load_backend)
    with pytest.raises(FileNotFoundError, match="no model"):
        runtime.serving()
