"""Installations sharing one Redis keep apart by their namespace, the database name *and* the
queue (CAESURA_QUEUE): every Redis key and channel-layer group Caesura builds is under it."""

from __future__ import annotations

import pytest
import redis
from channels.layers import BaseChannelLayer
from django.test import override_settings

from reviewer import events
from reviewer.events import queue, watching
from reviewer.gateway import limits
from reviewer.web import health
from reviewer.worker import flag_watcher, pause_flags

pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")


def names() -> dict[str, str]:
    """Every key, channel and group name, for one example of each."""
    return {
        "control": pause_flags.control_key(1),
        "wake": flag_watcher.wake_channel(),
        "watched": watching.key(1),
        "rate": limits.rate_key(1, 0),
        "alive": health.alive_key("w@host"),
        "loading": health.loading_key("w@host"),
        "session group": events.group_name(1),
        "queue group": queue.group_name(1),
        "owner group": queue.owner_group_name(1),
    }


def names_under(name: str, queue_name: str) -> dict[str, str]:
    databases = {"default": {"NAME": name}}
    with override_settings(DATABASES=databases, CELERY_TASK_DEFAULT_QUEUE=queue_name):
        return names()


def test_the_same_database_name_with_another_queue_gives_other_keys_and_groups(settings):
    name = settings.DATABASES["default"]["NAME"]
    with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-a"):
        first = names()
    with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-b"):
        second = names()
    assert settings.DATABASES["default"]["NAME"] == name  # only the queue differs
    for what in first:
        assert first[what] != second[what], what


def test_another_database_name_with_the_same_queue_gives_other_keys_and_groups():
    first, second = names_under("caesura_a", "caesura"), names_under("caesura_b", "caesura")
    for what in first:
        assert first[what] != second[what], what


def test_every_key_begins_with_the_one_namespace(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "caesura-fix2"
    space = health.namespace()
    assert space == f"caesura:{settings.DATABASES['default']['NAME']}:caesura-fix2"
    for what, name in names().items():
        if "group" not in what:
            assert name.startswith(space + ":"), what


@pytest.mark.parametrize(
    ("name", "queue_name"),
    [
        ("caesura", "caesura"),
        ("caesura_fix2", "caesura-fix2"),
        ("caesura", "celery.default"),  # a dot: not readable, hashed
        ("caesura", "odd:queue*[x]"),
        ("d" * 63, "q" * 200),  # long: hashed, still within channels' limit
    ],
)
def test_group_names_are_ones_the_channel_layer_accepts(name, queue_name):
    layer = BaseChannelLayer()
    for what, group in names_under(name, queue_name).items():
        if "group" in what:
            assert layer.require_valid_group_name(group), group
            assert len(group.replace("-1", "-" + "9" * 19)) < layer.MAX_NAME_LENGTH, group


def test_readable_and_hashed_group_namespaces_never_meet():
    # a database "x" with the queue "a.b" and a database "x.a" with the queue "b" read alike
    # once their colons became dots: a dot in a part makes the name hashed
    first = names_under("x", "a.b")["session group"]
    second = names_under("x.a", "b")["session group"]
    assert first != second
    assert names_under("caesura", "caesura")["session group"] == "session-caesura.caesura.caesura-1"


def test_a_worker_of_another_queue_on_the_same_database_does_not_count(settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-other"):
        theirs = health.alive_key("theirs-fix2@host")
    client.set(theirs, 1, ex=health.ALIVE_TTL_S)
    try:
        with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-other"):
            assert "theirs-fix2@host" in health.alive_workers()
        with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-ours"):
            assert "theirs-fix2@host" not in health.alive_workers()
    finally:
        client.delete(theirs)


def test_a_queue_with_glob_characters_matches_only_its_own_workers(settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    with override_settings(CELERY_TASK_DEFAULT_QUEUE="fix2-x"):
        other = health.alive_key("other-fix2@host")
    client.set(other, 1, ex=health.ALIVE_TTL_S)
    try:
        with override_settings(CELERY_TASK_DEFAULT_QUEUE="fix2-*"):  # would match fix2-x
            assert "other-fix2@host" not in health.alive_workers()
    finally:
        client.delete(other)


def test_a_pause_in_one_installation_is_not_seen_by_another(settings):
    """The reviewer's repro: installation B pausing its session 2 must not pause A's."""
    with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-b"):
        pause_flags.request_pause(2)
        theirs = pause_flags.control_key(2)
    try:
        with override_settings(CELERY_TASK_DEFAULT_QUEUE="caesura-fix2-a"):
            ours = pause_flags.control_key(2)
            assert pause_flags.redis_client().get(ours) is None
        assert pause_flags.redis_client().get(theirs) is not None
    finally:
        pause_flags.redis_client().delete(theirs)
