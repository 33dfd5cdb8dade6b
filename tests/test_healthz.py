import pytest
import redis

from reviewer.web.health import ALIVE_TTL_S, alive_key, alive_workers

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_keys(settings):
    """Redis keys a test writes, removed afterwards."""
    client, written = redis.Redis.from_url(settings.REDIS_URL), []

    def write(key: str) -> None:
        client.set(key, 1, ex=ALIVE_TTL_S)
        written.append(key)

    yield write
    for key in written:
        client.delete(key)


@pytest.mark.slow
def test_it_reports_everything_ok_with_a_real_worker(client, celery_worker_process):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["redis"]["ok"] and body["worker"]["ok"]
    from reviewer.web.health import engine_loading, loading_workers

    assert not engine_loading() and not loading_workers()  # its model is loaded


def test_it_answers_503_naming_redis_when_redis_is_down(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["redis"]["ok"] is False
    assert body["database"]["ok"] is True


def test_it_reports_the_worker_down_when_no_worker_beats(admin_client, monkeypatch):
    monkeypatch.setattr("reviewer.web.health.alive_workers", lambda: set())
    response = admin_client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"]["ok"] is False
    assert "no worker of this installation" in response.json()["worker"]["detail"]


def test_it_counts_only_the_workers_of_this_installation(redis_keys):
    redis_keys(alive_key("ours@host"))
    redis_keys("caesura:another_database:worker-alive:theirs@host")
    alive = alive_workers()
    assert "ours@host" in alive
    assert not any("theirs" in name for name in alive)


def test_it_reuses_one_redis_connection_across_calls(settings):
    from reviewer.web.health import redis_client

    name = f"caesura-test-{id(settings)}"
    redis_client().client_setname(name)  # names the connection the pool lends this thread
    for _ in range(20):  # e.g. twenty gateway requests' rate counts
        redis_client().ping()
    # the named connection is the one still in use: no call opened another
    assert redis_client().client_getname() == name
    assert sum(c["name"] == name for c in redis_client().client_list()) == 1


def test_it_makes_another_client_for_another_url(settings):
    from reviewer.web.health import redis_client

    first = redis_client()
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    assert redis_client() is not first


def test_it_tells_an_anonymous_caller_what_is_down_but_not_the_details(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    body = client.get("/healthz").json()
    assert body["redis"] == {"ok": False} and body["database"] == {"ok": True}
    settings.CAESURA_METRICS_TOKEN = "s3cret"
    bearer = client.get("/healthz", headers={"Authorization": "Bearer s3cret"}).json()
    assert bearer["redis"]["ok"] is False and bearer["redis"]["detail"]


def test_it_says_when_every_worker_still_loads_its_model(admin_client, redis_keys, monkeypatch):
    from reviewer.web import health

    monkeypatch.setattr(health, "alive_workers", lambda: {"ours@host"})
    assert not health.engine_loading()
    redis_keys(health.loading_key("ours@host"))
    assert health.engine_loading()
    detail = admin_client.get("/healthz").json()["worker"]["detail"]
    assert "ours@host (loading the model)" in detail
