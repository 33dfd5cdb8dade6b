"""Whether a reviewer's page follows a session: the mark a web process keeps in Redis and a
worker's relay reads (reviewer/events/watching.py)."""

from __future__ import annotations

import pytest

from reviewer.events import watching
from reviewer.web.health import redis_client

SESSION = 987_654_321  # no test's database reaches this id


@pytest.fixture(autouse=True)
def unmarked():
    client = redis_client()  # the test may point REDIS_URL elsewhere
    client.delete(watching.key(SESSION))
    yield
    client.delete(watching.key(SESSION))


def test_it_tells_a_marked_session_from_an_unmarked_one():
    assert not watching.is_watched(SESSION)
    watching.mark(SESSION)
    assert watching.is_watched(SESSION)
    assert not watching.is_watched(SESSION + 1)


def test_it_lets_the_mark_expire_on_its_own():
    watching.mark(SESSION)
    assert 0 < redis_client().ttl(watching.key(SESSION)) <= watching.TTL_S
    assert watching.REFRESH_S * 2 < watching.TTL_S  # a live feed renews it in time


def test_it_keeps_installations_that_share_a_redis_apart(monkeypatch):
    from django.conf import settings

    watching.mark(SESSION)
    monkeypatch.setitem(settings.DATABASES["default"], "NAME", "another_installation")
    assert not watching.is_watched(SESSION)


def test_it_answers_followed_where_redis_cannot_say(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert watching.is_watched(SESSION)
