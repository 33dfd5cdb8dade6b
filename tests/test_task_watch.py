"""The classifier's live accuracy counts only what a reviewer judged: a generation the
system approved unread says nothing of its label."""

from __future__ import annotations

import pytest

from reviewer import lifecycle
from reviewer.analytics import task_watch
from reviewer.lifecycle import gateway
from reviewer.models import ReviewSession, TaskCorrection
from tests.floor_factory import gateway_session
from tests.session_factory import make_session, stub_worker

pytestmark = pytest.mark.django_db


def classified(status: str = ReviewSession.COMPLETED) -> ReviewSession:
    return gateway_session(status, task_type="open", task_source="classifier")


def test_it_leaves_out_the_generations_the_system_approved(alice):
    wrong = classified()
    TaskCorrection.objects.create(session=wrong, given="open", corrected="reasoning")
    for _ in range(3):
        gateway.record_system_approval(classified())  # no policy paused it: nobody read it
    accuracy = task_watch.accuracy_window()
    assert (accuracy.judged, accuracy.corrected) == (1, 1)
    assert accuracy.accuracy == 0


def test_it_counts_a_generation_a_reviewer_decided(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = make_session(alice, ReviewSession.GENERATED, task_type="open")
    ReviewSession.objects.filter(pk=session.pk).update(task_source="classifier")
    lifecycle.approve(alice, session.pk)
    gateway.record_system_approval(classified())
    accuracy = task_watch.accuracy_window()
    assert (accuracy.judged, accuracy.corrected) == (1, 0)
