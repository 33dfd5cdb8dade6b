"""Paused states in a worker's memory, by session, within a memory budget: the least recently
used go first (each is in the vault since its pause, or rebuilt from its token ids)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from inference.state import DecodeState
from reviewer.analytics import metrics

log = logging.getLogger(__name__)


class StateCache:
    """Paused states by session, within a memory budget; the least recently used go first."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._states: OrderedDict[int, DecodeState] = OrderedDict()
        self._lock = threading.Lock()  # the task's thread and the relays' threads share it

    def get(self, session_id: int) -> DecodeState | None:
        with self._lock:
            state = self._states.get(session_id)
            if state is not None:
                self._states.move_to_end(session_id)
            return state

    def put(self, session_id: int, state: DecodeState) -> None:
        with self._lock:
            self._states[session_id] = state
            self._states.move_to_end(session_id)
            while len(self._states) > 1 and self.used() > self.budget:
                evicted, _ = self._states.popitem(last=False)  # in the vault since its pause
                log.info("state of session %s spilled to the vault (memory budget)", evicted)
            self._report()

    def drop(self, session_id: int) -> None:
        with self._lock:
            if self._states.pop(session_id, None) is not None:
                self._report()

    def _report(self) -> None:
        metrics.WORKER_STATES.set(len(self._states))
        metrics.WORKER_STATE_BYTES.set(self.used())

    def used(self) -> int:
        return sum(state_bytes(state) for state in self._states.values())

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._states


def state_bytes(state: DecodeState) -> int:
    from inference.transformers_backend.runner import ModelRunner

    # vLLM keeps a paused session's KV in its own prefix cache, not in the state.
    return ModelRunner.cache_bytes(state.cache) if state.cache is not None else 0
