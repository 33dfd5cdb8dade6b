"""Through a Postgres outage /metrics still serves every process's counters (its Postgres
figures left out, caesura_metrics_db_up 0) and /healthz answers within seconds; the
service checks never print Redis's password."""

from __future__ import annotations

import time

import pytest
import redis
from django.db import OperationalError
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import ConnectionPool

from reviewer.analytics import metrics
from reviewer.models import ReviewSession
from reviewer.web import health
from reviewer.web.preflight import ServiceUnavailable, check_redis
from tests.conftest import free_port

pytestmark = pytest.mark.django_db


def samples(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


@pytest.fixture
def unreachable_pool(monkeypatch):
    """The web server's pool, pointed at a port where no Postgres listens."""
    pool = ConnectionPool(
        f"host=127.0.0.1 port={free_port()} dbname=caesura_fix2 user=postgres connect_timeout=1",
        min_size=1,
        open=True,
        reconnect_timeout=60,
    )
    monkeypatch.setattr(health, "database_pool", lambda: pool)
    yield pool
    pool.close(timeout=1)


def test_metrics_are_served_with_db_up_while_postgres_answers(client):
    metrics.StepTimer().tick()
    response = client.get("/metrics")
    assert response.status_code == 200
    found = samples(response.content.decode())
    assert found["caesura_metrics_db_up"] == 1
    assert "caesura_sessions_running" in found


def test_a_failing_query_leaves_the_postgres_figures_out_and_serves_the_counters(
    client, monkeypatch
):
    metrics.StepTimer().tick()

    def failing(*args, **kwargs):
        raise OperationalError("couldn't get a connection after 10.00 sec")

    monkeypatch.setattr(ReviewSession.objects, "filter", failing)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = samples(response.content.decode())
    assert found["caesura_metrics_db_up"] == 0
    assert found["caesura_tokens_generated_total"] >= 1
    assert "caesura_sessions_running" not in found


def test_a_postgres_that_does_not_answer_is_not_queried_by_the_scrape(monkeypatch):
    def down(timeout_s):
        raise OperationalError("connection refused")

    def never(*args, **kwargs):
        raise AssertionError("queried Postgres after it did not answer")

    monkeypatch.setattr(health, "probe_database", down)
    monkeypatch.setattr(ReviewSession.objects, "filter", never)
    found = samples(metrics.exposition().decode())
    assert found["caesura_metrics_db_up"] == 0
    assert "task_classification_judged_sessions" not in found


def test_healthz_answers_503_within_seconds_when_the_pool_gets_no_connection(
    client, unreachable_pool
):
    began = time.monotonic()
    response = client.get("/healthz")
    took = time.monotonic() - began
    assert response.status_code == 503
    assert response.json()["database"]["ok"] is False
    assert took < 3, f"/healthz took {took:.1f} s"


def test_metrics_answer_within_seconds_when_the_pool_gets_no_connection(client, unreachable_pool):
    began = time.monotonic()
    response = client.get("/metrics")
    took = time.monotonic() - began
    assert response.status_code == 200
    assert samples(response.content.decode())["caesura_metrics_db_up"] == 0
    assert took < 3, f"/metrics took {took:.1f} s"


def test_the_probe_takes_a_pooled_connection_and_gives_it_back(monkeypatch, settings):
    from django.db import connection

    params = connection.get_connection_params()
    conninfo = (
        f"host={params.get('host') or '127.0.0.1'} port={params.get('port') or 5432} "
        f"dbname={params['dbname']} user={params.get('user') or 'postgres'}"
    )
    with ConnectionPool(conninfo, min_size=1, max_size=1, open=True) as pool:
        monkeypatch.setattr(health, "database_pool", lambda: pool)
        assert health.check_database().ok
        assert health.check_database().ok  # the one connection was handed back
        assert pool.get_stats()["pool_available"] == 1


# --- the service checks ---------------------------------------------------------------------


def test_the_redis_check_masks_the_password_when_reachable(settings, monkeypatch):
    settings.REDIS_URL = "redis://:pw123@127.0.0.1:6379/0"
    monkeypatch.setattr(redis.Redis, "ping", lambda self: True)
    said = check_redis()
    assert "pw123" not in said
    assert "redis://:**@127.0.0.1:6379/0" in said


def test_the_redis_check_masks_the_password_when_unreachable(settings):
    settings.REDIS_URL = f"redis://default:pw123@127.0.0.1:{free_port()}/0"
    with pytest.raises(ServiceUnavailable) as caught:
        check_redis()
    message = str(caught.value)
    assert "pw123" not in message
    assert "redis://default:**@127.0.0.1" in message and "REDIS_URL" in message
