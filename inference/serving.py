"""ServingLoop: one thread owns an engine (either backend); any number of threads use it.

A worker serves many sessions at once. Neither backend is thread-safe (vLLM's engine
core; the transformers engine's turn order and live-attention recorder), so the loop thread
alone touches the engine: it takes submitted runs and calls (start, edit, snapshot, ...)
between two steps, and steps while any run is active. A session's pause, edit or snapshot
waits at most for the step in progress, never for another session's generation to finish.
A long read (a pause's look-ahead) runs in slices, a forward a turn (``call_in_slices``).
``Served`` is the engine as other threads see it: each method call runs in the loop.

The loop thread should also load the engine (``ServingLoop(load=...)``): OpenMP keeps a
pool of worker threads for every thread that ever ran parallel work, for as long as that
thread lives, and GNU OpenMP stops its workers spinning between parallel regions once it
manages more threads than there are CPUs. A model loaded (or compiled) in the main thread
left the main thread's pool beside the loop's, and the loop decoded at about half speed on
two cores (measured: 15 against 28 tokens/s).
"""

from __future__ import annotations

import collections
import contextlib
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from typing import Any

from inference.backend import Backend
from inference.decode import Run, RunRequest, StopInfo
from inference.state import DecodeState

IDLE_WAIT_S = 0.5  # how long an idle loop sleeps before looking for work again
# A session's sink may fall this many tokens behind the engine (the page shows what the
# sink has passed on; a reviewer pauses at what they read) before the loop waits for it,
# at most PACE_WAIT_S a step, so that one stuck sink cannot stall the others for long.
MAX_BACKLOG = 2
PACE_WAIT_S = 0.05
# Each tensor operation of a step releases the GIL; taking it back waits until the thread that
# grabbed it meanwhile (a relay writing events, a web request) blocks or is asked to let go,
# after the interpreter's switch interval (5 ms by default). Many steps' worth of such waits
# made a worker with eight sessions decode markedly slower than the same loop alone, so a
# process that serves asks for the GIL back sooner.
SWITCH_INTERVAL_S = 0.0005
STEPS_TIMED = 32  # the steps whose median time ``timing["step_s"]`` gives

Prepare = Callable[[Backend], DecodeState]  # makes a state in the loop thread (a prefill)
# fn(engine, *args, **kwargs), its arguments, and the future that takes its result (or, if
# the loop stops before the call runs, the reason it never will)
Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], "Future[Any] | None"]
LATER = object()  # what a call returns whose future is answered later (a run, a sliced read)
# A long read in slices: each ``next`` is one slice (a forward), the return value the result.
Slices = Generator[None, None, Any]


class ServingLoop:
    def __init__(
        self,
        engine: Backend | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        *,
        load: Callable[[], Backend] | None = None,
    ) -> None:
        """Serve ``engine``, or the one ``load`` makes: loaded in the loop thread, and this
        waits for it (a failure to load is raised here)."""
        if (engine is None) == (load is None):
            raise TypeError("ServingLoop needs an engine or a function that loads one")
        self.on_failure = on_failure  # told once if the engine fails and the loop stops
        self._calls: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self._waiting: dict[str, tuple[Run, Future[StopInfo]]] = {}
        self._sliced: collections.deque[tuple[Slices, Future[Any]]] = collections.deque()
        self._wake = threading.Event()
        self._stopping = False
        self._accepting = threading.Lock()  # a call is queued before the loop stops, or refused
        hand_back_gil_sooner()
        # When the loop's current turn began (the step before it had ended) and when its step
        # began (after the calls and the pacing): a halt's latency is read against them.
        # ``step_s``: the median time of the last steps (a halt waits for at most the step in
        # progress: this is what it is measured against).
        self.timing: dict[str, float] = {"turn": 0.0, "step": 0.0, "step_s": 0.0}
        self._durations: collections.deque[float] = collections.deque(maxlen=STEPS_TIMED)
        make: Callable[[], Backend | None] = load if load is not None else (lambda: engine)
        loaded: Future[Backend] = Future()
        self._thread = threading.Thread(
            target=self._serve,
            args=(make, loaded),
            name="caesura-serving",
            daemon=True,
        )
        self._thread.start()
        self.engine: Backend = loaded.result()

    # ---- from any thread ----------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(engine, *args, **kwargs)`` in the loop thread; its result or exception."""
        future: Future[Any] = Future()
        self._put(fn, args, kwargs, future)
        return future.result()

    def call_in_slices(self, fn: Callable[..., Slices], *args: Any, **kwargs: Any) -> Any:
        """``fn(engine, *args, **kwargs)`` makes a generator; the loop runs one slice of it (up
        to its next ``yield``) a turn, between steps and calls, and this returns its return
        value. A long read (a look-ahead's forwards) so never keeps a pause, an edit or another
        session's step waiting for more than one slice."""
        future: Future[Any] = Future()

        def begin(engine: Backend) -> object:
            self._sliced.append((fn(engine, *args, **kwargs), future))
            return LATER

        self._put(begin, (), {}, future)
        return future.result()

    def submit(
        self, state: DecodeState | Prepare, request: RunRequest | None = None
    ) -> Future[StopInfo]:
        """Start generating; the future gives the StopInfo (or raises what the run raised).
        Its callbacks run in the loop thread: they must be quick and never wait on the loop.
        ``state`` may be a function that makes it in the loop thread (a new session's prefill):
        sessions submitted meanwhile are then prefilled one after another between two steps,
        and the caller does not wait for it; a failure to make it is the future's."""
        future: Future[StopInfo] = Future()

        def start(engine: Backend) -> object:
            begun = state if isinstance(state, DecodeState) else state(engine)
            generation = engine.submit(begun, request)
            self._waiting[generation.key] = (generation, future)
            return LATER

        self._put(start, (), {}, future)
        return future

    def run(self, state: DecodeState, request: RunRequest | None = None) -> StopInfo:
        """``Engine.run`` for one session, batched with every other session's run."""
        return self.submit(state, request).result()

    def _put(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        future: Future[Any] | None,
    ) -> None:
        with self._accepting:
            if self._stopping:
                raise RuntimeError("the serving loop has stopped")
            self._calls.put((fn, args, kwargs, future))
        self._wake.set()

    def close(self) -> None:
        stopped = RuntimeError("the serving loop has stopped")
        self._stop(stopped)
        self._wake.set()
        self._thread.join()
        self._drop_sliced(stopped)
        for _generation, future in self._waiting.values():
            future.set_exception(stopped)
        self._waiting.clear()

    def _stop(self, exc: Exception) -> None:
        """Take no more calls; those queued are answered with ``exc``, so that no caller waits
        for ever (a Celery task waiting would keep its worker from shutting down)."""
        with self._accepting:
            self._stopping = True
        while True:
            try:
                _fn, _args, _kwargs, future = self._calls.get_nowait()
            except queue.Empty:
                return
            if future is not None:
                future.set_exception(exc)

    # ---- the loop thread -----------------------------------------------------------------
    def _serve(self, load: Callable[[], Backend | None], loaded: Future[Backend]) -> None:
        try:
            engine = load()
            assert engine is not None, "a loader returns its engine"
        except BaseException as exc:
            loaded.set_exception(exc)
            return
        self.engine = engine
        loaded.set_result(engine)
        self._loop()

    def _loop(self) -> None:
        parts: dict[str, float] = {}
        while not self._stopping:
            began = time.time()
            # What the turn before took (its calls, slice, pacing and step): a request that
            # came during it waited that long at most before the loop could honour it.
            self.timing["previous_turn_s"] = began - self.timing.get("turn", began)
            for part, took in parts.items():
                self.timing[f"previous_{part}_s"] = took
            self.timing["turn"] = began
            parts = dict.fromkeys(TURN_PARTS, 0.0)
            with timed(parts, "calls"):
                self._take_calls()
            with timed(parts, "slice"):
                self._next_slice()
            if self.engine.active:
                with timed(parts, "pace"):
                    self._pace()
                with timed(parts, "step"):
                    self._step()
            elif not self._sliced:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
            self._resolve()

    def _pace(self) -> None:
        """Wait (a little) for sinks that fell behind: generating far ahead of what the
        reviewer sees would make a pause land later than the text they paused at. A pause
        or cancel asked for is never kept waiting: the step that honours it goes at once."""
        deadline = time.monotonic() + PACE_WAIT_S
        while time.monotonic() < deadline:
            runs = list(self.engine.active.values())
            if self._asked():
                return
            if not any(run.sink.backlog() > MAX_BACKLOG for run in runs):
                return
            time.sleep(0.002)

    def _step(self) -> None:
        self.timing["step"] = began = time.time()
        try:
            self.engine.step()
        except Exception as exc:  # vLLM itself failed: every waiting run hears it
            self._fail_all(exc)
        self._durations.append(time.time() - began)
        self.timing["step_s"] = statistics.median(self._durations)

    def _asked(self) -> bool:
        return any(run.asked for run in list(self.engine.active.values()))

    def _take_calls(self) -> None:
        while not self._stopping:
            if self._asked():  # a pause or cancel goes before the calls waiting (a preview's
                self._step()  # forwards, another session's prefill): the asked run halts first
                self._resolve()
            try:
                fn, args, kwargs, future = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                result = fn(self.engine, *args, **kwargs)
            except Exception as exc:
                if future is not None:
                    future.set_exception(exc)
                continue
            if future is not None and result is not LATER:
                future.set_result(result)
            self._resolve()  # a call that stepped the engine may have ended runs

    def _next_slice(self) -> None:
        """One slice of the oldest sliced call (then it waits behind the others)."""
        if not self._sliced or self._asked():  # an asked run halts first (next turn's calls)
            return
        slices, future = self._sliced.popleft()
        try:
            next(slices)
        except StopIteration as done:
            future.set_result(done.value)
        except Exception as exc:
            future.set_exception(exc)
        else:
            self._sliced.append((slices, future))

    def _drop_sliced(self, exc: Exception) -> None:
        while self._sliced:
            slices, future = self._sliced.popleft()
            slices.close()
            future.set_exception(exc)

    def _resolve(self) -> None:
        for key, (generation, future) in list(self._waiting.items()):
            if generation.done:
                del self._waiting[key]
                if generation.error is not None:
                    future.set_exception(generation.error)
                else:
                    assert generation.stop is not None  # done without an error
                    future.set_result(generation.stop)

    def _fail_all(self, exc: Exception) -> None:
        """The engine failed mid-step (each backend catches a session's own failure): its
        state is unknown, so the loop stops serving."""
        self._stop(exc)
        for _generation, future in self._waiting.values():
            future.set_exception(exc)
        self._waiting.clear()
        self._drop_sliced(exc)
        if self.on_failure is not None:
            self.on_failure(exc)


# What a turn is made of, each timed (``timing["previous_<part>_s"]``: in the turn before):
# a halt waits for whatever the loop had in progress when it was asked.
TURN_PARTS = ("calls", "slice", "pace", "step")


@contextlib.contextmanager
def timed(parts: dict[str, float], part: str) -> Iterator[None]:
    began = time.time()
    try:
        yield
    finally:
        parts[part] = time.time() - began


def hand_back_gil_sooner() -> None:
    """Other threads of this process hold the GIL at most SWITCH_INTERVAL_S while the loop
    thread waits for it (never lengthened where the process chose shorter)."""
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))


class Served:
    """The loop's engine as another thread sees it: attributes read through, and each method
    call runs in the loop thread between two steps (its result or exception comes back)."""

    def __init__(self, loop: ServingLoop) -> None:
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.loop.engine, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: self.loop.call(_method(name), *args, **kwargs)

    def run(self, state: DecodeState, request: RunRequest | None = None) -> StopInfo:
        """Generate until a stop, batched or interleaved with every other session's run."""
        return self.loop.run(state, request)


def _method(name: str) -> Callable[..., Any]:
    return lambda engine, *args, **kwargs: getattr(engine, name)(*args, **kwargs)
