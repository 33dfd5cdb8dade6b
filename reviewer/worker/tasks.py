"""Celery tasks: thin — ids in, the worker runtime does the work, failures mark the session.

The web side sends them by name through ``reviewer/worker/dispatch.py``; the names live there."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, NoReturn

from celery import shared_task
from celery.exceptions import WorkerShutdown
from celery.platforms import EX_FAILURE
from celery.signals import task_prerun, worker_ready, worker_shutdown, worker_shutting_down
from django.db import close_old_connections

from reviewer import lifecycle
from reviewer.analytics import metrics
from reviewer.worker import dispatch, failures, heartbeat, relay, runtime
from webapp.heap import freeze_startup_objects

if TYPE_CHECKING:
    from celery import Task
    from celery.worker import WorkController
    from celery.worker.consumer import Consumer

log = logging.getLogger(__name__)


@shared_task(bind=True, name=dispatch.RUN_SEGMENT, acks_late=True, reject_on_worker_lost=True)
def run_segment(self: Task[..., str], session_id: int, segment: str) -> str:
    try:
        hostname = self.request.hostname
        assert hostname is not None, "a worker's task request names the worker"
        return runtime.run_segment(session_id, segment, hostname)
    except lifecycle.SegmentSuperseded:
        return "superseded"  # a newer segment carries on; nothing failed
    except Exception as exc:
        relay.record_failure(session_id, failures.describe(exc), segment)  # Postgres may be why
        raise


@shared_task(name=dispatch.ATTENTION_VIEW)
def attention_view(session_id: int, layer: int) -> None:
    try:
        runtime.attention_view(session_id, layer)
    except Exception as exc:
        lifecycle.record_attention_failed(session_id, failures.describe(exc))
        raise


@shared_task(name=dispatch.RELEASE_STATE)
def release_state(session_id: int) -> None:
    runtime.drop_state(session_id)


@worker_ready.connect
def on_worker_ready(sender: Consumer, **kwargs: object) -> None:
    # Alive first: a previous incarnation's sessions go back to work while the model loads.
    heartbeat.start(sender.hostname)  # it says "loading the model" until it is loaded
    try:
        heartbeat.loading_model(sender.hostname, runtime.engine)  # once, before any session
    except Exception as exc:
        engine_unloadable(sender.hostname, exc)
    freeze_startup_objects()  # the model and its modules: collections need not walk them
    metrics.serve_worker_metrics()


def engine_unloadable(hostname: str, exc: Exception) -> NoReturn:
    """The engine cannot load (no model at CAESURA_MODEL, a CAESURA_* value it refuses):
    every session given to this worker would fail. It says why, takes its heartbeat down
    (/healthz no longer counts it) and exits non-zero before it takes any work, so that a
    supervisor, compose or a person sees it down. WorkerShutdown is Celery's own way out of
    a start: a signal handler's other exceptions are only logged."""
    log.critical(
        "the engine cannot load (%s: %s); worker %s stops", type(exc).__name__, exc, hostname
    )
    with contextlib.suppress(Exception):  # Redis out of reach too: the key lapses in its TTL
        heartbeat.stop(hostname)
    raise WorkerShutdown(EX_FAILURE) from exc


@task_prerun.connect
def on_task_prerun(sender: Task[..., object] | None = None, **kwargs: object) -> None:
    # As a request does: a stale or broken connection is dropped, a good one kept (Celery's own
    # close after every task is off, settings.CELERY_DB_REUSE_MAX says why). A task applied
    # eagerly runs on its caller's connection, which may be inside a transaction.
    if sender is None or not sender.request.is_eager:
        close_old_connections()


@worker_shutting_down.connect
def on_worker_shutting_down(sender: str, **kwargs: object) -> None:
    heartbeat.stop(sender)
    metrics.process_ended()


@worker_shutdown.connect
def on_worker_shutdown(sender: WorkController, **kwargs: object) -> None:
    # The heartbeat's thread beats on while the worker stops (a warm shutdown, or a start
    # that failed): its key goes again as the process ends, not one TTL later.
    hostname = getattr(sender, "hostname", None)
    if hostname:
        with contextlib.suppress(Exception):  # out of reach: the key lapses in its TTL
            heartbeat.stop(hostname)
