"""The suite's own harness: when Postgres cancels a transactional test's table truncation to
break a deadlock with another connection (the run's worker reads the tables meanwhile), the
truncation runs again instead of failing the test and leaving its rows to the next one."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection
from django.test import TransactionTestCase

pytestmark = pytest.mark.django_db(transaction=True)


class Case(TransactionTestCase):
    __test__ = False  # it only lends its teardown
    databases = {"default"}

    def runTest(self) -> None:
        pass


def truncated_tables() -> tuple[str, str]:
    """The first and the last table of the truncation, in the order Postgres locks them."""
    (statement,) = sql_flush(no_style(), connection, reset_sequences=False)
    names = statement.removeprefix("TRUNCATE ").rstrip(";").split(", ")
    return names[0].strip('"'), names[-1].strip('"')


def flush_in_thread(failures: list[BaseException]) -> threading.Thread:
    def flush() -> None:
        try:
            Case()._fixture_teardown()
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=flush)
    thread.start()
    return thread


def truncation_waits(other: psycopg.Connection) -> bool:
    row = other.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE 'TRUNCATE%%' AND datname = current_database()"
    ).fetchone()
    return bool(row and row[0])


def test_it_truncates_again_when_a_deadlock_cancels_the_truncation(alice):
    first, last = truncated_tables()
    params = connection.get_connection_params()
    with psycopg.connect(**params) as other, psycopg.connect(**params, autocommit=True) as look:
        other.execute(f'SELECT 1 FROM "{last}" LIMIT 1')  # holds the last table, in a transaction
        failures: list[BaseException] = []
        flushing = flush_in_thread(failures)
        deadline = time.monotonic() + 10
        while not truncation_waits(look):  # it holds every table but the last
            assert time.monotonic() < deadline, "the truncation never waited for the last table"
            time.sleep(0.02)
        # Waits for the first table: a deadlock, which Postgres breaks by cancelling the
        # truncation, which waited first.
        other.execute(f'SELECT 1 FROM "{first}" LIMIT 1')
        other.rollback()
        flushing.join(timeout=30)
    assert not flushing.is_alive() and failures == []
    assert not get_user_model().objects.exists()
