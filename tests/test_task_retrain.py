"""Retraining the task classifier on reviewers' corrections: at least 200 corrected samples,
a version stored and audited, enabled only when its held-out accuracy reaches 88 %."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from reviewer.analytics import task_models
from reviewer.lifecycle import task_types
from reviewer.models import AuditRecord, ReviewSession, TaskClassifierVersion, TaskCorrection
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db

ASKS = {
    "deterministic": "Look up the tariff code of shipment {n} in the customs ledger.",
    "open": "Write a warm welcome letter to new member number {n} of the club.",
    "reasoning": "Work out step by step whether route {n} is cheaper than the ferry.",
}


def corrections(owner, count: int, scrambled: bool = False) -> None:
    """`count` sessions a reviewer labelled; scrambled: with labels that ignore the text."""
    labels = list(ASKS)
    for n in range(count):
        label = labels[n % 3]
        text = ASKS[labels[(n // 3) % 3] if scrambled else label].format(n=n)
        session = make_session(
            owner, ReviewSession.COMPLETED, task_type="open", task_source="classifier"
        )
        ReviewSession.objects.filter(pk=session.pk).update(input_text=text)
        TaskCorrection.objects.create(session=session, given="open", corrected=label)


def retrain(*args: str) -> str:
    out = io.StringIO()
    call_command("retrain_task_classifier", *args, stdout=out)
    return out.getvalue()


def test_it_refuses_to_retrain_on_fewer_than_200_corrected_samples(alice):
    corrections(alice, 199)
    with pytest.raises(CommandError, match="199 corrected samples; retraining needs at least 200"):
        retrain("--enable")
    assert not TaskClassifierVersion.objects.exists()


def test_it_enables_a_version_that_reaches_88_percent_and_audits_it(alice):
    corrections(alice, 200)
    printed = retrain("--enable")
    version = TaskClassifierVersion.objects.get()
    assert version.enabled and version.accuracy >= task_models.TARGET_ACCURACY
    assert version.metrics["corrected_examples"] == 200
    assert "enabled: new sessions are labelled by v1" in printed
    actions = AuditRecord.objects.filter(session=None).values_list("action", flat=True)
    assert list(actions.order_by("id")) == ["task_classifier_trained", "task_classifier_enabled"]
    assert task_types.classifier() is task_models.active_classifier()
    assert len(task_models.training_examples()) == len(task_types.load_examples()) + 200


def test_a_session_start_reads_the_training_data_once_per_process(alice, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    corrections(alice, 200)
    retrain("--enable")
    monkeypatch.setattr(task_models, "_fitted", {})  # a process that has not met v1 yet

    def reads_data() -> list[bool]:
        with CaptureQueriesContext(connection) as queries:
            assert task_types.classify(ASKS["reasoning"].format(n=7)) == "reasoning"
        return ['"data"' in q["sql"] for q in queries.captured_queries]

    assert reads_data() == [False, True]  # the checksum, then the data to fit it
    assert reads_data() == [False]  # fitted: the checksum alone


def test_it_keeps_a_version_below_88_percent_disabled(alice):
    corrections(alice, 240, scrambled=True)
    with pytest.raises(CommandError, match="below the 88% target; it stays disabled"):
        retrain("--enable")
    version = TaskClassifierVersion.objects.get()
    assert not version.enabled and version.accuracy < task_models.TARGET_ACCURACY
    assert task_models.active_classifier() is None  # new sessions keep the shipped classifier
    assert not AuditRecord.objects.filter(action="task_classifier_enabled").exists()


def test_without_enable_it_stores_a_disabled_version(alice):
    corrections(alice, 200)
    assert "disabled: run again with --enable" in retrain()
    assert not TaskClassifierVersion.objects.get().enabled


def test_the_admin_refuses_to_enable_a_version_below_the_target(admin_user):
    examples = task_types.load_examples()
    low = task_models.store_version(examples, {"accuracy": 0.8}, "test")
    good = task_models.store_version(examples, {"accuracy": 0.9}, "test")
    client = Client()
    client.force_login(admin_user)
    url = "/admin/reviewer/taskclassifierversion/"
    assert client.get(url).status_code == 200
    for version in (low, good):
        body = {"action": "enable", "_selected_action": [version.pk]}
        client.post(url, body, follow=True)
    low.refresh_from_db()
    good.refresh_from_db()
    assert not low.enabled and good.enabled
    enabled = AuditRecord.objects.get(action="task_classifier_enabled")
    assert (enabled.actor, enabled.payload["version"]) == ("root", good.version)


def test_a_new_version_is_judged_on_the_sessions_it_labelled_alone(alice, monkeypatch):
    from reviewer import lifecycle
    from reviewer.analytics import task_watch
    from tests.session_factory import clinical_notes, stub_worker

    stub_worker(monkeypatch)
    corrections(alice, 200)  # the shipped classifier's labels, every one corrected
    assert task_watch.accuracy_window().judged == 100  # its window
    assert task_watch.accuracy_window().accuracy < 0.5  # two labels in three were wrong
    retrain("--enable")
    now = task_watch.accuracy_window()
    assert (now.judged, now.version) == (0, 1)  # v1 has labelled nothing yet

    started = lifecycle.start_session(alice, clinical_notes().slug, ASKS["reasoning"].format(n=9))
    session = ReviewSession.objects.get(pk=started["id"])
    assert (session.task_type, session.task_classifier_version) == ("reasoning", 1)
    ReviewSession.objects.filter(pk=session.pk).update(status=ReviewSession.COMPLETED)
    assert (task_watch.accuracy_window().judged, task_watch.accuracy_window().accuracy) == (1, 1)

    chosen = lifecycle.start_session(
        alice, clinical_notes().slug, ASKS["open"].format(n=9), task_type="reasoning"
    )
    assert ReviewSession.objects.get(pk=chosen["id"]).task_classifier_version is None
