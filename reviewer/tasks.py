"""Celery tasks: thin — ids in, the worker runtime does the work, failures mark the session."""

from __future__ import annotations

from celery import current_app, shared_task
from celery.signals import worker_ready, worker_shutting_down
from celery.utils import worker_direct
from django.conf import settings

from reviewer import metrics, services, worker


@shared_task(bind=True, name="reviewer.run_segment", acks_late=True, reject_on_worker_lost=True)
def run_segment(self, session_id: int, segment: str) -> str:
    try:
        return worker.run_segment(session_id, segment, self.request.hostname)
    except services.SegmentSuperseded:
        return "superseded"  # a newer segment carries on; nothing failed
    except Exception as exc:
        services.record_failure(session_id, f"{type(exc).__name__}: {exc}", segment)
        raise


def dispatch_segment(args: tuple[int, str], holder: str | None) -> None:
    _send(run_segment, args, holder)


@shared_task(name="reviewer.attention_view")
def attention_view(session_id: int, layer: int) -> None:
    try:
        worker.attention_view(session_id, layer)
    except Exception as exc:
        services.record_attention_failed(session_id, f"{type(exc).__name__}: {exc}")
        raise


def dispatch_attention(args: tuple[int, int], holder: str | None) -> None:
    _send(attention_view, args, holder)


@shared_task(name="reviewer.release_state")
def release_state(session_id: int) -> None:
    worker.states.drop(session_id)


def dispatch_release(session_id: int, holder: str) -> None:
    """Tell the worker holding a finished session's paused state to free that memory."""
    _send(release_state, (session_id,), holder)


def _send(task, args: tuple, holder: str | None) -> None:
    """To the worker holding the session's state when there is one, else to any worker.
    A broker blip shorter than the Redis grace is retried through, not lost."""
    policy = {"max_retries": max(3, settings.CAESURA_REDIS_GRACE_S), "interval_start": 0}
    policy |= {"interval_step": 0.5, "interval_max": 1}
    if holder:
        task.apply_async(args=args, queue=worker_direct(holder), retry_policy=policy)
    else:
        task.apply_async(args=args, retry_policy=policy)


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


@worker_ready.connect
def on_worker_ready(sender, **kwargs) -> None:
    # Alive first: a previous incarnation's sessions go back to work while the model loads.
    worker.start_heartbeat(sender.hostname)
    worker.engine()  # load the model once, before the first session arrives
    metrics.serve_worker_metrics()


@worker_shutting_down.connect
def on_worker_shutting_down(sender, **kwargs) -> None:
    worker.stop_heartbeat(sender)
    metrics.process_ended()
