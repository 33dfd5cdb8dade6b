"""Task-aware decoding: the classifier's held-out accuracy and speed, and how a session uses it."""

from __future__ import annotations

import io
import re
import time

import pytest
from django.core.management import call_command
from django.test import Client

from inference.config import TASK_PRESETS
from reviewer import lifecycle
from reviewer.lifecycle import task_types
from reviewer.models import ReviewSession, TaskDecoding
from tests.session_factory import clinical_notes, stub_worker


@pytest.fixture(scope="module")
def trained():
    train, held_out = task_types.split(task_types.load_examples())
    return task_types.TaskClassifier().fit(train), held_out


def test_it_has_enough_varied_examples():
    examples = task_types.load_examples()
    assert len(examples) >= 300
    assert {e.domain for e in examples} >= {"clinical", "contract", "underwriting", "patent"}
    assert {e.lang for e in examples} == {"en", "zh"}
    assert {e.label for e in examples} == set(task_types.LABELS)
    assert len({e.text for e in examples}) == len(examples), "duplicate prompts"


def test_it_holds_out_examples_it_never_trains_on(trained):
    train, held_out = task_types.split(task_types.load_examples())
    assert not {e.text for e in train} & {e.text for e in held_out}
    assert len(held_out) >= 0.15 * (len(train) + len(held_out))


def test_it_labels_held_out_prompts_with_at_least_85_percent_accuracy(trained):
    classifier, held_out = trained
    assert task_types.evaluate(classifier, held_out).accuracy >= 0.85


def test_it_labels_a_prompt_in_under_5_ms(trained):
    classifier, held_out = trained
    started = time.perf_counter()
    for example in held_out:
        classifier.predict(example.text)
    per_prompt = (time.perf_counter() - started) / len(held_out)
    assert per_prompt < 0.005


def test_the_command_prints_accuracy_and_a_confusion_matrix():
    out = io.StringIO()
    call_command("evaluate_task_classifier", "--min-accuracy", "0.85", stdout=out)
    printed = out.getvalue()
    accuracy = float(re.search(r"accuracy: ([\d.]+)%", printed).group(1))
    assert accuracy >= 85
    assert "confusion matrix" in printed
    matrix = [line.split() for line in printed.splitlines() if line.startswith(task_types.LABELS)]
    held_out = len(task_types.split(task_types.load_examples())[1])
    assert sum(int(n) for row in matrix for n in row[1:]) == held_out


# --- sessions ----------------------------------------------------------------------------------


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.mark.django_db
def test_it_records_the_label_and_the_decoding_it_chose(alice, dispatched):
    domain = clinical_notes()
    prompt = "Extract the ICD-10 code for essential hypertension from this note."
    sid = lifecycle.start_session(alice, domain.name, prompt, seed=1)["id"]
    session = ReviewSession.objects.get(pk=sid)
    assert (session.task_type, session.task_source) == (task_types.classify(prompt), "classifier")
    assert session.decoding["temperature"] == TASK_PRESETS[session.task_type]["temperature"]


@pytest.mark.django_db
def test_an_override_beats_the_classifier_and_uses_the_domain_preset(alice, dispatched):
    domain = clinical_notes()
    TaskDecoding.objects.create(domain=domain, task_type="reasoning", params={"temperature": 0.2})
    prompt = "Extract the ICD-10 code for essential hypertension from this note."
    assert task_types.classify(prompt) != "reasoning"
    sid = lifecycle.start_session(alice, domain.name, prompt, seed=1, task_type="reasoning")["id"]
    session = ReviewSession.objects.get(pk=sid)
    assert (session.task_type, session.task_source) == ("reasoning", "override")
    assert session.decoding["temperature"] == 0.2  # the domain's override of the preset
    assert session.decoding["top_k"] == TASK_PRESETS["reasoning"]["top_k"]


@pytest.mark.django_db
def test_the_api_takes_a_task_type_and_shows_it(alice, dispatched):
    clinical_notes()
    client = Client()
    client.force_login(alice)
    body = {"domain": "Clinical notes", "input": "Fever.", "task_type": "deterministic"}
    created = client.post("/api/sessions", body, content_type="application/json")
    assert created.status_code == 201
    detail = client.get(f"/api/sessions/{created.json()['id']}").json()
    assert detail["task_type"] == "deterministic" and detail["task_source"] == "override"
    assert detail["decoding"]["temperature"] == 0.0
    bad = client.post(
        "/api/sessions", {**body, "task_type": "poetry"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "task_type" in bad.json()["error"]
