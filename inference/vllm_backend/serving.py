"""ServingLoop: one thread owns a VllmEngine; any number of threads use it at once.

A worker serving many sessions gives each session's task its own thread. vLLM is not
thread-safe, so the loop thread alone touches the engine: it takes submitted runs and
calls (start, edit, snapshot, ...) between two steps and steps while any run is active.
A session's pause, edit or snapshot waits at most for the step in progress, never for
another session's generation to finish.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from inference.control import ControlHandle
from inference.engine import StopInfo
from inference.sink import Sink
from inference.state import DecodeState
from inference.vllm_backend.engine import VllmEngine
from inference.vllm_backend.generation import Generation

IDLE_WAIT_S = 0.5  # how long an idle loop sleeps before looking for work again

# fn(engine, *args, **kwargs), its arguments, and the future that takes its result
Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], "Future[Any] | None"]


class ServingLoop:
    def __init__(self, engine: VllmEngine) -> None:
        self.engine = engine
        self._calls: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self._waiting: dict[str, tuple[Generation, Future[StopInfo]]] = {}
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="vllm-serving", daemon=True)
        self._thread.start()

    # ---- from any thread ----------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(engine, *args, **kwargs)`` in the loop thread; its result or exception."""
        future: Future[Any] = Future()
        self._put(fn, args, kwargs, future)
        return future.result()

    def submit(
        self,
        state: DecodeState,
        sink: Sink | None = None,
        control: ControlHandle | None = None,
        max_new_tokens: int | None = None,
        pause_at: int | None = None,
    ) -> Future[StopInfo]:
        """Start generating; the future gives the StopInfo (or raises what the run raised)."""
        future: Future[StopInfo] = Future()

        def start(engine: VllmEngine) -> None:
            try:
                generation = engine.submit(state, sink, control, max_new_tokens, pause_at)
            except Exception as exc:
                future.set_exception(exc)
                return
            self._waiting[generation.key] = (generation, future)

        self._put(start, (), {}, None)
        return future

    def run(self, state: DecodeState, *args: Any, **kwargs: Any) -> StopInfo:
        """``Engine.run`` for one session, batched with every other session's run."""
        return self.submit(state, *args, **kwargs).result()

    def _put(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        future: Future[Any] | None,
    ) -> None:
        if self._stopping:
            raise RuntimeError("the serving loop has stopped")
        self._calls.put((fn, args, kwargs, future))
        self._wake.set()

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    # ---- the loop thread -----------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stopping:
            self._take_calls()
            if self.engine.active:
                try:
                    self.engine.step()
                except Exception as exc:  # vLLM itself failed: every waiting run hears it
                    self._fail_all(exc)
            else:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
            self._resolve()

    def _take_calls(self) -> None:
        while True:
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
            if future is not None:
                future.set_result(result)
            self._resolve()  # a call that stepped the engine may have ended runs

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
        """vLLM failed mid-step: its state is unknown, so the loop stops serving."""
        self._stopping = True
        for _generation, future in self._waiting.values():
            future.set_exception(exc)
        self._waiting.clear()
