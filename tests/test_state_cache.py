from reviewer.worker import runtime, state_cache
from reviewer.worker.state_cache import StateCache


def test_it_spills_the_least_recently_used_state_over_budget(monkeypatch):
    monkeypatch.setattr(state_cache, "state_bytes", lambda state: state["bytes"])
    cache = StateCache(budget_bytes=250)
    cache.put(1, {"bytes": 100})
    cache.put(2, {"bytes": 100})
    assert cache.get(1) is not None  # 1 is now the most recently used
    cache.put(3, {"bytes": 100})
    assert 2 not in cache and 1 in cache and 3 in cache
    assert cache.used() == 200


def test_it_keeps_a_single_state_even_above_budget(monkeypatch):
    monkeypatch.setattr(state_cache, "state_bytes", lambda state: state["bytes"])
    cache = StateCache(budget_bytes=10)
    cache.put(1, {"bytes": 100})
    assert 1 in cache
    cache.drop(1)
    assert 1 not in cache


def test_it_reports_what_it_holds_as_worker_gauges(monkeypatch):
    from reviewer.analytics import metrics

    monkeypatch.setattr(state_cache, "state_bytes", lambda state: state["bytes"])
    cache = StateCache(budget_bytes=1000)
    cache.put(1, {"bytes": 100})
    cache.put(2, {"bytes": 300})
    assert metrics.WORKER_STATES._value.get() == 2
    assert metrics.WORKER_STATE_BYTES._value.get() == 400
    cache.drop(1)
    assert metrics.WORKER_STATES._value.get() == 1
    assert metrics.WORKER_STATE_BYTES._value.get() == 300


def test_the_release_task_frees_a_finished_sessions_state(monkeypatch):
    from reviewer.worker import tasks

    monkeypatch.setattr(state_cache, "state_bytes", lambda state: state["bytes"])
    monkeypatch.setattr(runtime, "states", StateCache(budget_bytes=1000))
    runtime.states.put(7, {"bytes": 100})
    tasks.release_state(7)
    assert 7 not in runtime.states
