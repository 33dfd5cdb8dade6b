import pytest

from reviewer.web.preflight import ServiceUnavailable, check_redis, ensure_database


def test_it_names_the_postgres_address_and_the_fix(settings):
    settings.DATABASES = {
        **settings.DATABASES,
        "default": {**settings.DATABASES["default"], "PORT": 1},
    }
    with pytest.raises(ServiceUnavailable) as caught:
        ensure_database()
    message = str(caught.value)
    assert "127.0.0.1:1" in message and "docker compose up" in message and "DATABASE_URL" in message


def test_it_names_the_redis_address_and_the_fix(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    with pytest.raises(ServiceUnavailable) as caught:
        check_redis()
    assert "redis://127.0.0.1:1/0" in str(caught.value) and "REDIS_URL" in str(caught.value)


@pytest.mark.django_db
def test_it_creates_a_missing_database_once(settings):
    import psycopg

    name = "caesura_check_create"
    with psycopg.connect(
        dbname="postgres", host="127.0.0.1", user="postgres", autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
    settings.DATABASES = {
        **settings.DATABASES,
        "default": {**settings.DATABASES["default"], "NAME": name},
    }
    try:
        assert "created" in ensure_database()
        assert "present" in ensure_database()
    finally:
        with psycopg.connect(
            dbname="postgres", host="127.0.0.1", user="postgres", autocommit=True
        ) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
