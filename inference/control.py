"""External control of a running generation: pause or cancel from another thread or process."""

from __future__ import annotations

import threading

PAUSE = "pause"
CANCEL = "cancel"


class ControlHandle:
    """Thread-safe flag the engine polls between every two tokens.

    The engine calls ``poll()`` once per step and ``clear()`` after it has honoured a
    pause, so one request pauses once. A backend shared between processes (e.g. Redis)
    subclasses this and overrides ``poll``, ``clear`` and the two ``request_*`` methods;
    ``reason`` says why the pause was asked for.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._command: str | None = None
        self._reason = "manual"

    def request_pause(self, reason: str = "manual") -> None:
        with self._lock:
            if self._command != CANCEL:  # cancel wins over pause
                self._command, self._reason = PAUSE, reason

    def request_cancel(self) -> None:
        with self._lock:
            self._command = CANCEL

    def poll(self) -> str | None:
        """ "pause", "cancel" or None. Must be cheap: it runs once per token."""
        with self._lock:
            return self._command

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    def clear(self) -> None:
        with self._lock:
            self._command, self._reason = None, "manual"
