"""Work handed to the workers: every task is sent from here, by name.

Sending by name keeps the web side free of the worker runtime (services never import the
worker or the tasks module); the names are the ones ``reviewer/worker/tasks.py`` registers.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.utils import worker_direct
from django.conf import settings

RUN_SEGMENT = "reviewer.run_segment"
ATTENTION_VIEW = "reviewer.attention_view"
RELEASE_STATE = "reviewer.release_state"


def segment(args: tuple[int, str], holder: str | None) -> None:
    """Run (or continue) a session's segment: ``(session_id, segment)``."""
    _send(RUN_SEGMENT, args, holder)


def attention(args: tuple[int, int], holder: str | None) -> None:
    """One layer's attention at a pause: ``(session_id, layer)``."""
    _send(ATTENTION_VIEW, args, holder)


def release(session_id: int, holder: str) -> None:
    """Tell the worker holding a finished session's paused state to free that memory."""
    _send(RELEASE_STATE, (session_id,), holder)


def _send(name: str, args: tuple[int | str, ...], holder: str | None) -> None:
    """To the worker holding the session's state when there is one, else to any worker.
    A broker blip shorter than the Redis grace is retried through, not lost."""
    options: dict[str, Any] = {"retry": True, "retry_policy": _retry_policy()}
    if holder:
        options["queue"] = worker_direct(holder)
    current_app.send_task(name, args=args, **options)


def _retry_policy() -> dict[str, Any]:
    return {
        "max_retries": max(3, settings.CAESURA_REDIS_GRACE_S),
        "interval_start": 0,
        "interval_step": 0.5,
        "interval_max": 1,
    }


def hand_over_queues(hostnames: list[str]) -> dict[str, int]:
    """Send again, to the shared queue, every task waiting in these dead workers' own
    queues; how many were moved, by name."""
    moved: dict[str, int] = {}
    if not hostnames:
        return moved
    with current_app.connection_for_write() as connection:
        for hostname in hostnames:
            queue = worker_direct(hostname)(connection.default_channel)
            while (message := queue.get(no_ack=False)) is not None:
                args, kwargs, _ = message.decode()
                current_app.send_task(message.headers["task"], args=args, kwargs=kwargs)
                message.ack()
                moved[hostname] = moved.get(hostname, 0) + 1
    return moved
