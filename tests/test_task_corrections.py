"""Reviewers correct a session's task type (audited); the corrections give the classifier's
live accuracy over a sliding window, exported as `task_classification_accuracy` beside the
drift test, and shown on the dashboard."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from reviewer import lifecycle
from reviewer.analytics import task_models, task_watch
from reviewer.lifecycle import task_types
from reviewer.models import AuditRecord, ReviewSession, TaskCorrection
from tests.session_factory import clinical_notes, make_session
from tests.test_task_drift import SHIFTED

pytestmark = pytest.mark.django_db
S = ReviewSession


def correct(client: Client, session: ReviewSession, task_type) -> object:
    url = f"/api/sessions/{session.pk}/correct_task"
    return client.post(url, {"task_type": task_type}, content_type="application/json")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def classified(owner, label: str, status: str = S.COMPLETED, text: str = "Fever since Monday."):
    session = make_session(owner, status, task_type=label, task_source="classifier")
    if text != session.input_text:
        ReviewSession.objects.filter(pk=session.pk).update(input_text=text)
    return session


def scrape() -> dict[tuple[str, tuple], float]:
    text = Client().get("/metrics").content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


# --- the command ---------------------------------------------------------------------------


def test_it_records_a_reviewers_correction_with_an_audit_record(alice):
    session = classified(alice, "open", S.PAUSED)
    response = correct(logged_in(alice), session, "deterministic")
    assert response.status_code == 200, response.content
    shown = response.json()["task_correction"]
    assert (shown["given"], shown["corrected"], shown["corrected_by"]) == (
        "open",
        "deterministic",
        "alice",
    )
    record = AuditRecord.objects.get(session=session, action="task_corrected")
    assert record.payload == {"given": "open", "source": "classifier", "corrected": "deterministic"}
    session.refresh_from_db()
    assert session.task_type == "open"  # what decided its decoding stays on record
    detail = logged_in(alice).get(f"/api/sessions/{session.pk}").json()
    assert (
        detail["task_type"] == "open" and detail["task_correction"]["corrected"] == "deterministic"
    )


def test_a_second_correction_replaces_the_first_and_both_are_audited(alice):
    session = classified(alice, "open")
    client = logged_in(alice)
    correct(client, session, "reasoning")
    correct(client, session, "open")  # on second thoughts, the classifier was right
    assert TaskCorrection.objects.get(session=session).agrees
    payloads = AuditRecord.objects.filter(session=session, action="task_corrected")
    assert [p.payload.get("replaces") for p in payloads.order_by("id")] == [None, "reasoning"]


def test_it_refuses_an_unknown_task_type_and_changes_nothing(alice):
    session = classified(alice, "open")
    for bad in ["poetry", 3, "", None]:
        response = correct(logged_in(alice), session, bad)
        assert response.status_code == 400, bad
        assert "task_type" in response.json()["error"]
    assert not TaskCorrection.objects.exists()
    assert not AuditRecord.objects.filter(action="task_corrected").exists()


def test_bob_cannot_correct_alices_session(alice, bob):
    session = classified(alice, "open")
    assert correct(logged_in(bob), session, "reasoning").status_code == 404
    assert not TaskCorrection.objects.exists()


def test_on_the_floor_only_the_claims_holder_corrects_a_waiting_generation(alice, bob):
    clinical_notes().reviewers.add(alice, bob)
    session = make_session(None, S.PAUSED, task_type="open", task_source="classifier")
    lifecycle.claim(alice, session.pk)
    assert correct(logged_in(bob), session, "reasoning").status_code == 409
    assert correct(logged_in(alice), session, "reasoning").status_code == 200
    decided = make_session(None, S.COMPLETED, task_type="open", task_source="classifier")
    assert correct(logged_in(bob), decided, "reasoning").status_code == 200


# --- the accuracy window and the metric ----------------------------------------------------


def test_corrections_give_the_accuracy_over_the_judged_sessions(alice):
    for _ in range(8):
        classified(alice, "open")  # approved without a correction: the label stood
    for label in ("open", "reasoning"):
        wrong = classified(alice, label, S.PAUSED)
        TaskCorrection.objects.create(session=wrong, given=label, corrected="deterministic")
    confirmed = classified(alice, "reasoning", S.PAUSED)
    TaskCorrection.objects.create(session=confirmed, given="reasoning", corrected="reasoning")
    classified(alice, "open", S.RUNNING)  # nobody judged it yet
    make_session(alice, S.COMPLETED, task_type="open", task_source="override")  # not classified
    accuracy = task_watch.accuracy_window()
    assert (accuracy.judged, accuracy.corrected) == (11, 2)
    assert accuracy.accuracy == pytest.approx(9 / 11) and accuracy.below_target


def test_the_window_slides_over_the_most_recent_judged_sessions(alice):
    for _ in range(5):
        wrong = classified(alice, "open")
        TaskCorrection.objects.create(session=wrong, given="open", corrected="reasoning")
    for _ in range(10):
        classified(alice, "open")
    assert task_watch.accuracy_window(size=10).accuracy == 1.0
    assert task_watch.accuracy_window(size=15).accuracy == pytest.approx(10 / 15)


def test_it_exports_the_accuracy_as_task_classification_accuracy(alice):
    assert ("task_classification_accuracy", ()) not in scrape()  # no judged session: no figure
    for _ in range(3):
        classified(alice, "open")
    correct(logged_in(alice), classified(alice, "open"), "deterministic")
    samples = scrape()
    assert samples[("task_classification_accuracy", ())] == pytest.approx(0.75)
    assert samples[("task_classification_judged_sessions", ())] == 4


# --- drift, on the dashboard and in the metrics --------------------------------------------


def test_it_warns_of_drift_when_recent_sessions_come_from_a_new_domain(alice, admin_user):
    for text in SHIFTED:
        classified(alice, "open", text=text)
    samples = scrape()
    assert samples[("task_classification_drift", ())] == 1
    assert samples[("task_classification_drift_p_value", (("feature", "known_share"),))] < 0.01
    page = logged_in(admin_user).get("/dashboard/").content.decode()
    assert 'id="task-drift" role="alert"' in page and "share of known n-grams" in page


def test_it_shows_no_drift_when_recent_sessions_are_like_the_training_set(
    alice, admin_user, monkeypatch
):
    """The classifier in use knows the training split; the sessions bring the held-out
    prompts: new texts of the kinds it was trained on."""
    train, held_out = task_types.split(task_types.load_examples())
    model = task_types.TaskClassifier().fit(train)
    monkeypatch.setattr(task_models, "training_examples", lambda: train)
    monkeypatch.setattr(task_types, "classifier", lambda: model)
    for example in held_out:
        classified(alice, example.label, text=example.text)
    assert scrape()[("task_classification_drift", ())] == 0
    page = logged_in(admin_user).get("/dashboard/").content.decode()
    assert 'role="alert"' not in page.split('id="task-classifier"')[1].split("</section>")[0]
    assert "No drift over the last" in page


def test_it_gives_no_drift_figure_below_thirty_sessions(alice, admin_user):
    for text in SHIFTED[:5]:
        classified(alice, "open", text=text)
    assert ("task_classification_drift", ()) not in scrape()
    page = logged_in(admin_user).get("/dashboard/").content.decode()
    assert "Not tested: 5 recent sessions" in page
