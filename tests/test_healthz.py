import pytest
import redis

from reviewer.health import ping_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_ping_state(settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(ping_key())
    yield
    client.delete(ping_key())


@pytest.mark.slow
def test_it_reports_everything_ok_with_a_real_worker(
    client, celery_worker_process, fresh_ping_state
):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["redis"]["ok"] and body["worker"]["ok"]


def test_it_answers_503_naming_redis_when_redis_is_down(client, settings, fresh_ping_state):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["redis"]["ok"] is False
    assert body["database"]["ok"] is True


def test_it_reports_the_worker_down_when_no_ping_is_answered(client, monkeypatch, fresh_ping_state):
    monkeypatch.setattr("reviewer.health._ping_workers", lambda: False)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"]["ok"] is False
