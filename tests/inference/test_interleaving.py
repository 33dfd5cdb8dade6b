"""Many sessions in one transformers engine: interleaved a token at a time, each exactly as
when it runs alone, and a waiting pause halts its session before anyone's next token."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from inference.control import ControlHandle
from inference.decode import RunRequest
from inference.serving import TURN_PARTS, Served, ServingLoop
from inference.sink import CollectingSink, FinishEvent, PauseNotice, Sink, TokenEvent

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPTS = ["alpha beta", "gamma delta epsilon", "zeta", "eta theta iota kappa"]
PARAMS = [
    {"temperature": 0.0, "max_new_tokens": 10},
    {"temperature": 0.9, "seed": 3, "max_new_tokens": 10},
    {"temperature": 0.0, "max_new_tokens": 7},
    {"temperature": 0.7, "top_k": 20, "seed": 9, "max_new_tokens": 10},
]


def solo_runs(engine, live: bool = False) -> list[CollectingSink]:
    sinks = []
    for prompt, params in zip(PROMPTS, PARAMS, strict=True):
        sink = CollectingSink()
        engine.run(
            engine.start(prompt, params), RunRequest(sink, live_attention="mean" if live else None)
        )
        sinks.append(sink)
    return sinks


def tokens(sink: CollectingSink) -> list[int]:
    return [e.token_id for e in sink.events if isinstance(e, TokenEvent)]


def test_it_interleaves_sessions_one_token_each_and_matches_solo_runs(engine):
    alone = solo_runs(engine, live=True)
    states = [engine.start(p, params) for p, params in zip(PROMPTS, PARAMS, strict=True)]
    sinks = [CollectingSink() for _ in states]
    runs = [
        engine.submit(s, RunRequest(k, live_attention="mean"))
        for s, k in zip(states, sinks, strict=True)
    ]
    lengths = []
    while engine.active:
        engine.step()
        lengths.append([len(s.generated_ids) for s in states])
    # turns go round: after the first round every session has its first token
    assert lengths[3] == [1, 1, 1, 1]
    assert [tokens(s) for s in sinks] == [tokens(s) for s in alone]
    rows = [[e.attention for e in s.events if isinstance(e, TokenEvent)] for s in sinks]
    assert rows == [[e.attention for e in s.events if isinstance(e, TokenEvent)] for s in alone]
    assert all(isinstance(s.events[-1], FinishEvent) for s in sinks)
    assert [r.stop.reason for r in runs] == ["max_tokens"] * 4


def test_a_run_submitted_while_others_generate_gets_its_first_token_at_the_next_step(engine):
    """A new session (or a resume) does not wait for a step of every other session: its
    first token comes at the next step, then it takes its turn with the others."""
    states = [engine.start(p, params) for p, params in zip(PROMPTS, PARAMS, strict=True)]
    for state in states[:3]:
        engine.submit(state, RunRequest(CollectingSink()))
    for _ in range(4):  # every session has stepped, session 1 twice; session 2 is next
        engine.step()
    assert [len(s.generated_ids) for s in states] == [2, 1, 1, 0]
    late = CollectingSink()
    engine.submit(states[3], RunRequest(late))
    engine.step()
    assert [len(s.generated_ids) for s in states] == [2, 1, 1, 1]
    assert tokens(late) == [states[3].generated_ids[0]]
    for _ in range(3):  # then the turn goes on where it was, the new run last
        engine.step()
    assert [len(s.generated_ids) for s in states] == [3, 2, 2, 1]
    engine.step()
    assert [len(s.generated_ids) for s in states] == [3, 2, 2, 2]
    while engine.active:
        engine.step()
    alone = solo_runs(engine)
    assert [list(s.generated_ids) for s in states] == [tokens(s) for s in alone]


def test_it_halts_a_session_with_a_waiting_pause_before_the_next_token(engine):
    states = [engine.start(p, params) for p, params in zip(PROMPTS, PARAMS, strict=True)]
    controls = [ControlHandle() for _ in states]
    runs = [engine.submit(s, RunRequest(None, c)) for s, c in zip(states, controls, strict=True)]
    for _ in range(6):  # a few turns in: session 2 has had one or two tokens
        engine.step()
    held = len(states[2].generated_ids)
    controls[2].request_pause()
    ended = engine.step()  # session 2 is not next in turn, yet it halts now
    assert ended == [runs[2]]
    assert runs[2].stop.reason == "pause" and runs[2].stop.position == held
    assert len(states[2].generated_ids) == held
    assert controls[2].poll() is None  # the request was honoured once
    controls[0].request_cancel()
    assert engine.step() == [runs[0]] and runs[0].stop.reason == "cancel"
    while engine.active:
        engine.step()
    engine.run(states[2])  # resumed alone, it ends where an uninterrupted run ends
    assert tokens_of(states)[1:] == [tokens(s) for s in solo_runs(engine)][1:]


def tokens_of(states) -> list[list[int]]:
    return [list(s.generated_ids) for s in states]


class Exploding(Sink):
    def on_token(self, event: TokenEvent) -> None:
        if event.position == 2:
            raise RuntimeError("the sink's storage went away")


def test_it_ends_only_the_failing_session(engine):
    states = [engine.start(p, params) for p, params in zip(PROMPTS[:2], PARAMS[:2], strict=True)]
    failing = engine.submit(states[0], RunRequest(Exploding()))
    healthy = engine.submit(states[1])
    with pytest.raises(RuntimeError, match="went away"):
        engine.drive(failing)
    assert engine.drive(healthy).reason == "max_tokens"
    assert tokens_of(states)[1] == tokens(solo_runs(engine)[1])
    assert not engine.active


def test_it_serves_threads_through_one_loop_with_pauses_from_outside(engine):
    alone = [tokens(s) for s in solo_runs(engine)]
    loop = ServingLoop(engine)
    served = Served(loop)

    def session(i: int) -> list[int]:
        state = served.start(PROMPTS[i], PARAMS[i])
        control = ControlHandle()
        future = loop.submit(state, RunRequest(None, control))
        control.request_pause()  # a reviewer presses Pause while others generate
        stop = future.result()
        assert stop.reason in ("pause", "max_tokens")
        if stop.reason == "pause":
            served.signals(state)  # a reviewer looks at the pause, in the loop's thread
            served.run(state)
        return list(state.generated_ids)

    try:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            assert list(pool.map(session, range(len(PROMPTS)))) == alone
        assert served.backend == "transformers"  # attributes read through
    finally:
        loop.close()


@pytest.mark.model
@pytest.mark.slow
def test_it_interleaves_real_model_sessions_with_policies(real_engine):
    policies = [{"name": "article", "kind": "regex", "params": {"pattern": r"\b[Tt]he\b"}}]
    prompts = ["Write a short note about ibuprofen dosing.", "Name three rivers in Europe."]
    params = {"temperature": 0.0, "max_new_tokens": 24}
    alone = []
    for prompt in prompts:
        state = real_engine.start(prompt, params, policies)
        sink = CollectingSink()
        real_engine.run(state, RunRequest(sink))
        alone.append((list(state.generated_ids), [type(e) for e in sink.events][-1]))
    states = [real_engine.start(p, params, policies) for p in prompts]
    sinks = [CollectingSink() for _ in states]
    runs = [real_engine.submit(s, RunRequest(k)) for s, k in zip(states, sinks, strict=True)]
    for run in runs:
        real_engine.drive(run)
    together = [
        (list(s.generated_ids), [type(e) for e in k.events][-1])
        for s, k in zip(states, sinks, strict=True)
    ]
    assert together == alone
    assert PauseNotice in {last for _, last in together}  # the policy did pause one


class BrokenControl(ControlHandle):
    def poll(self) -> str | None:
        raise ConnectionError("the flag store is out of reach")


def test_it_ends_only_the_session_whose_control_fails(engine):
    states = [engine.start(p, params) for p, params in zip(PROMPTS[:2], PARAMS[:2], strict=True)]
    broken = engine.submit(states[0], RunRequest(None, BrokenControl()))
    healthy = engine.submit(states[1])
    assert engine.step() == [broken]
    assert isinstance(broken.error, ConnectionError) and not states[0].generated_ids
    assert engine.drive(healthy).reason == "max_tokens"


class FailingEngine:
    """An engine whose step fails outright (the backend itself broke)."""

    def __init__(self, engine) -> None:
        self.inner, self.active = engine, {}

    def submit(self, state, *args):
        run = self.inner.submit(state, *args)
        self.active = self.inner.active
        return run

    def step(self):
        raise MemoryError("the engine ran out of memory")


def test_it_tells_every_waiting_session_and_its_owner_when_the_engine_fails(engine):
    failures = []
    loop = ServingLoop(FailingEngine(engine), on_failure=failures.append)
    try:
        future = loop.submit(engine.start(PROMPTS[0], PARAMS[0]))
        with pytest.raises(MemoryError):
            future.result(timeout=10)
        assert [type(f) for f in failures] == [MemoryError]
        with pytest.raises(RuntimeError, match="stopped"):
            loop.call(lambda e: None)
    finally:
        engine.active.clear()
        loop.close()


class SlowWriter(Sink):
    """Passes each token on from another thread, 30 ms later (a database under load)."""

    def __init__(self) -> None:
        import threading

        self.received = self.written = 0
        self.most_behind = 0
        self.lock = threading.Lock()

    def on_token(self, event: TokenEvent) -> None:
        import threading

        self.received += 1
        self.most_behind = max(self.most_behind, self.backlog())
        threading.Timer(0.03, self._wrote).start()

    def _wrote(self) -> None:
        with self.lock:
            self.written += 1

    def backlog(self) -> int:
        return self.received - self.written


def test_it_paces_the_loop_to_a_sink_that_falls_behind(engine):
    from inference.serving import MAX_BACKLOG

    loop = ServingLoop(engine)
    try:
        state = Served(loop).start(PROMPTS[0], {"temperature": 0.0, "max_new_tokens": 30})
        sink = SlowWriter()
        assert loop.submit(state, RunRequest(sink)).result(timeout=30).reason == "max_tokens"
        # the tiny model steps in about a millisecond: unpaced, the sink would be ~all behind
        assert sink.most_behind <= MAX_BACKLOG + 1
    finally:
        loop.close()


def test_it_loads_its_engine_in_its_own_thread_and_serves_it(engine):
    loaded_in = []

    def load():
        loaded_in.append(threading.current_thread())
        return engine

    loop = ServingLoop(load=load)
    try:
        assert loaded_in == [loop._thread] and loop.engine is engine
        state = Served(loop).start(PROMPTS[0], PARAMS[0])
        assert loop.run(state).reason == "max_tokens"
        assert len(state.generated_ids) == PARAMS[0]["max_new_tokens"]
    finally:
        loop.close()


def test_it_raises_a_failed_load_to_whoever_made_the_loop(engine):
    def load():
        raise OSError("no model in /nowhere")

    with pytest.raises(OSError, match="nowhere"):
        ServingLoop(load=load)
    with pytest.raises(TypeError, match="engine or a function"):
        ServingLoop()
    with pytest.raises(TypeError, match="engine or a function"):
        ServingLoop(engine, load=lambda: engine)


def test_it_makes_other_threads_hand_the_gil_back_to_the_loop_sooner(engine):
    import sys

    from inference.serving import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # the interpreter's default
        loop = ServingLoop(engine)
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S, rel=0.05)
        loop.close()
        sys.setswitchinterval(SWITCH_INTERVAL_S / 5)  # a process that chose shorter keeps it
        loop = ServingLoop(engine)
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S / 5, rel=0.05)
        loop.close()
    finally:
        sys.setswitchinterval(before)


def test_it_prefills_new_sessions_in_the_loop_without_the_caller_waiting(engine):
    alone = [tokens(s) for s in solo_runs(engine)]
    loop = ServingLoop(engine)
    made: list[int] = []

    def prefill(i: int):
        def make(eng):
            made.append(i)
            return eng.start(PROMPTS[i], PARAMS[i])

        return make

    def refused(eng):
        raise ValueError("prompt: too long")

    try:
        sinks = [CollectingSink() for _ in PROMPTS]
        futures = [loop.submit(prefill(i), RunRequest(s)) for i, s in enumerate(sinks)]
        failing = loop.submit(refused, RunRequest(CollectingSink()))
        assert [f.result(60).reason for f in futures] == ["max_tokens"] * len(PROMPTS)
        assert [tokens(s) for s in sinks] == alone  # each exactly as alone
        assert sorted(made) == list(range(len(PROMPTS)))
        with pytest.raises(ValueError, match="prompt: too long"):
            failing.result(10)
        assert loop.run(engine.start(PROMPTS[2], PARAMS[2])).reason == "max_tokens"  # serves on
    finally:
        loop.close()


def generating(loop: ServingLoop):
    """A long greedy run in ``loop`` that has written its first tokens; its control."""
    state = Served(loop).start(PROMPTS[0], {"temperature": 0.0, "max_new_tokens": 500})
    control = ControlHandle()
    run = loop.submit(state, RunRequest(None, control))
    while len(state.generated_ids) < 2:
        time.sleep(0.001)
    return state, control, run


def test_a_pause_asked_while_calls_wait_halts_before_they_run(engine):
    """A preview's forwards or another session's prefill queued in the loop never hold up a
    halt: the asked run stops at the token it was asked at, before the next call runs."""
    loop = ServingLoop(engine)
    try:
        state, control, run = generating(loop)
        held, hold = threading.Event(), threading.Event()

        def busy(_engine) -> None:  # the loop is inside a long call
            held.set()
            hold.wait(30)

        seen: list[bool] = []
        calls = [
            threading.Thread(target=loop.call, args=(busy,)),
            threading.Thread(target=loop.call, args=(lambda _e: seen.append(run.done()),)),
        ]
        calls[0].start()
        held.wait(30)
        calls[1].start()  # queued behind the long call
        time.sleep(0.2)
        asked_at = len(state.generated_ids)  # the loop is held: no token comes meanwhile
        control.request_pause()
        hold.set()
        for thread in calls:
            thread.join(30)
        assert seen == [True]  # the run had halted before the queued call ran
        stop = run.result(timeout=30)
        assert stop.reason == "pause" and stop.position == asked_at
    finally:
        loop.close()


def test_a_read_in_slices_lets_the_sessions_step_between_its_slices(engine):
    """A long read (a look-ahead's forwards) runs a slice a turn: the generating session
    writes a token between any two slices, and a pause asked meanwhile halts where asked."""
    loop = ServingLoop(engine)
    try:
        state, control, run = generating(loop)
        seen: list[int] = []

        def read(_engine):
            for _ in range(4):
                seen.append(len(state.generated_ids))
                yield
            return "read"

        assert loop.call_in_slices(read) == "read"
        assert all(b > a for a, b in zip(seen, seen[1:], strict=False))  # a step between

        def ask_then_read(_engine):
            control.request_pause()  # asked while the read is in progress
            yield
            return len(state.generated_ids)

        length_after = loop.call_in_slices(ask_then_read)
        stop = run.result(timeout=30)
        assert stop.reason == "pause" and length_after == stop.position
    finally:
        loop.close()


def test_a_read_in_slices_that_fails_tells_its_caller_and_the_loop_serves_on(engine):
    loop = ServingLoop(engine)
    try:

        def failing(_engine):
            yield
            raise ValueError("the second slice failed")

        with pytest.raises(ValueError, match="second slice"):
            loop.call_in_slices(failing)
        assert loop.run(engine.start(PROMPTS[2], PARAMS[2])).reason == "max_tokens"
    finally:
        loop.close()


def test_it_times_what_each_turn_held_so_a_halt_can_be_read_against_it(engine):
    """At a halt the loop's timing tells what the turn before held (its calls, slice, pacing
    and step, each timed), and when the halting turn's step began after its own calls."""
    loop = ServingLoop(engine)
    seen: list[dict[str, float]] = []

    class AtHalt(Sink):
        def on_pause(self, event: PauseNotice) -> None:  # in the loop thread, at the halt
            seen.append(dict(loop.timing))

    try:
        state = Served(loop).start(PROMPTS[0], {"temperature": 0.0, "max_new_tokens": 500})
        control = ControlHandle()
        run = loop.submit(state, RunRequest(AtHalt(), control))
        while len(state.generated_ids) < 3:
            time.sleep(0.001)

        def busy(_engine) -> None:  # asked while the loop is inside a call
            control.request_pause()
            time.sleep(0.06)

        loop.call(busy)
        assert run.result(timeout=30).reason == "pause"
    finally:
        loop.close()
    (timing,) = seen
    parts = [timing[f"previous_{part}_s"] for part in TURN_PARTS]
    assert timing["previous_step_s"] > 0 and sum(parts) <= timing["previous_turn_s"]
    assert timing["step"] - timing["turn"] >= 0.06  # the halting turn's call went first
