"""Enabling a task classifier version switches off the one enabled before it, and that switch
is audited as a disable is (``task_classifier_disabled``, naming the version that replaced it),
before the new version's ``task_classifier_enabled``."""

from __future__ import annotations

import pytest
from django.test import Client

from reviewer.analytics import task_models
from reviewer.lifecycle import audit, task_types
from reviewer.models import AuditRecord, TaskClassifierVersion

pytestmark = pytest.mark.django_db
SWITCHES = ("task_classifier_enabled", "task_classifier_disabled")


def switches() -> list[tuple[str, str, dict]]:
    rows = AuditRecord.objects.filter(action__in=SWITCHES).order_by("id")
    return list(rows.values_list("action", "actor", "payload"))


@pytest.fixture
def versions() -> tuple[TaskClassifierVersion, TaskClassifierVersion]:
    examples = task_types.load_examples()
    first = task_models.store_version(examples, {"accuracy": 0.9}, "test")
    second = task_models.store_version(examples, {"accuracy": 0.95}, "test")
    return first, second


def test_enabling_a_version_audits_the_switch_off_of_the_previous_one(versions):
    first, second = versions
    task_models.enable(first, "ops")
    task_models.enable(second, "ops")
    assert list(TaskClassifierVersion.objects.filter(enabled=True)) == [second]
    assert [(action, actor, p["version"]) for action, actor, p in switches()] == [
        ("task_classifier_enabled", "ops", first.version),
        ("task_classifier_disabled", "ops", first.version),
        ("task_classifier_enabled", "ops", second.version),
    ]
    disabled = switches()[1][2]
    assert disabled["replaced_by"] == second.version
    assert (disabled["checksum"], disabled["accuracy"]) == (first.checksum, 0.9)
    task_models.enable(second, "ops")  # already the one: nothing switches, nothing recorded
    assert len(switches()) == 3
    assert audit.first_broken_record() is None


def test_the_admins_enable_action_audits_the_switch_off_too(versions, admin_user):
    first, second = versions
    client = Client()
    client.force_login(admin_user)
    url = "/admin/reviewer/taskclassifierversion/"
    for version in (first, second):
        client.post(url, {"action": "enable", "_selected_action": [version.pk]}, follow=True)
    disabled = AuditRecord.objects.get(action="task_classifier_disabled")
    assert (disabled.actor, disabled.payload["version"]) == ("root", first.version)
    assert disabled.payload["replaced_by"] == second.version


def test_a_stale_copy_neither_enables_twice_nor_disables_twice(versions):
    """Each switch reads the version as stored, under a lock: a copy read before another
    switch records only what it changes."""
    first, _ = versions
    stale = TaskClassifierVersion.objects.get(pk=first.pk)
    task_models.enable(first, "ops")
    task_models.enable(stale, "ops")  # enabled already: no second record
    task_models.disable(first, "ops")
    task_models.disable(stale, "ops")  # stale copy says enabled; it is not any more
    assert [action for action, _, _ in switches()] == [
        "task_classifier_enabled",
        "task_classifier_disabled",
    ]
