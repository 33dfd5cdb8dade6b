"""A worker's tasks keep their database connection from one to the next, as requests do under
a sync server: Celery's own close around every task made each segment's start open a new one.
A connection that broke meanwhile is replaced before the next task uses it."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from reviewer.worker.tasks import on_task_prerun

pytestmark = pytest.mark.django_db(transaction=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_it_keeps_a_good_connection_between_tasks_and_replaces_a_broken_one(settings):
    from webapp.celery import app

    assert app.conf.get("CELERY_DB_REUSE_MAX") >= 1_000_000  # else Celery closes it each time
    on_task_prerun()
    first = backend_pid()
    on_task_prerun()
    assert backend_pid() == first

    params = connection.get_connection_params()
    with psycopg.connect(**{**params, "autocommit": True}) as other:  # Postgres drops it
        other.execute("SELECT pg_terminate_backend(%s)", [first])
    on_task_prerun()
    assert backend_pid() != first
