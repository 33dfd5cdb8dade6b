"""The heartbeat thread's database connection: kept from beat to beat (a new one a second
cost Postgres a backend start a second), replaced after a failure."""

import pytest
from django.db import connection

from reviewer.worker import heartbeat

pytestmark = pytest.mark.django_db


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.fixture
def beats(monkeypatch):
    """A beat of a worker that holds its lock; nothing announced for /healthz to see."""
    monkeypatch.setattr(heartbeat.liveness, "hold", lambda hostname: False)
    monkeypatch.setattr(heartbeat, "announce", lambda hostname: None)
    return heartbeat.Beats("test-heartbeat")


def test_it_keeps_its_database_connection_between_beats(beats):
    first = backend_pid()
    beats.once()
    beats.once()
    assert backend_pid() == first


def test_it_drops_its_connection_after_a_failed_step(beats, monkeypatch):
    backend_pid()

    def fails() -> None:
        raise ConnectionError("Postgres went away")

    monkeypatch.setattr(heartbeat, "recover_orphans", fails)
    beats.once()
    held = connection.connection  # closed: the next beat connects afresh
    assert held is None or held.closed
