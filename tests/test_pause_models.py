"""The learned pause policy on the web side: labels from history, training by command,
versions kept in Postgres and on disk, enabling audited, files written back for workers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from inference.learned.pause_training import load_starter_set
from inference.policies import build_policy
from reviewer.analytics import pause_models
from reviewer.models import (
    AuditRecord,
    Edit,
    PauseEvent,
    PauseModelVersion,
    PausePolicy,
    ReviewSession,
    SessionEvent,
)
from reviewer.web.policy_forms import param_field_name
from tests.test_policy_calibration import WORDS, cut_at_finish, token_event

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def model_dir(settings, tmp_path, monkeypatch) -> Path:
    settings.PAUSE_MODEL_DIR = tmp_path / "pause_models"
    # one domain's fragments train in a quarter of the time, with the same code path
    monkeypatch.setattr(
        pause_models, "load_starter_set", lambda: load_starter_set(domains=["clinical-note"])
    )
    return settings.PAUSE_MODEL_DIR


def session_with_pauses(owner, domain) -> ReviewSession:
    """Nine tokens; pauses after 2 (manual), 4 (policy, then an edit) and 7 (policy, resumed)."""
    session = ReviewSession.objects.create(
        owner=owner, domain=domain, input_text="Note.", model_name="tiny",
        status=ReviewSession.GENERATED, text="".join(WORDS), generated_ids=list(range(9)),
    )  # fmt: skip
    pauses = {
        2: PauseEvent.objects.create(
            session=session, position=2, trigger="manual", kind="manual", reason="asked",
            halted_at=timezone.now(), resumed_at=timezone.now(),
        ),
        4: PauseEvent.objects.create(
            session=session, position=4, trigger="Sure", kind="overconfidence", reason="sure",
            halted_at=timezone.now(), resumed_at=timezone.now(),
        ),
        7: PauseEvent.objects.create(
            session=session, position=7, trigger="Unsure", kind="low_confidence", reason="unsure",
            halted_at=timezone.now(), resumed_at=timezone.now(),
        ),
    }  # fmt: skip
    Edit.objects.create(
        session=session, pause=pauses[4], kind="replace", author=owner, applied=True,
        text_before=" definitely", text_after=" probably",
    )  # fmt: skip
    seq = 0
    for position, word in enumerate(WORDS):
        seq += 1
        SessionEvent.objects.create(
            session=session, seq=seq, type="token", payload=token_event(position, word, 0.5)
        )
        if position + 1 in pauses:
            seq += 1
            payload = {"pause_id": pauses[position + 1].pk, "position": position + 1}
            SessionEvent.objects.create(session=session, seq=seq, type="pause", payload=payload)
    return session


def test_it_labels_the_pauses_reviewers_answered(alice, plain_domain):
    session_with_pauses(alice, plain_domain)
    examples = sorted(pause_models.history_examples(plain_domain), key=lambda e: e.key)
    moments = [(e.text_before, e.next_text, e.label) for e in examples]
    assert sorted(moments) == [
        (" The", " patient", 1),  # the reviewer paused here
        (" The patient is", " definitely", 1),  # a policy paused and the reviewer edited
        (" The patient is definitely stable.", " Give", 0),  # resumed unchanged
    ]
    assert all(e.signals == {"top1_prob": 0.5, "entropy": 0.3} for e in examples)


def test_it_holds_out_a_sessions_pauses_together(alice, plain_domain):
    from inference.learned.pause_training import split

    session_with_pauses(alice, plain_domain)
    examples = pause_models.history_examples(plain_domain)
    for salt in map(str, range(20)):  # whichever bucket the session falls in
        train, held_out = split(examples, salt)
        assert len(held_out) in (0, len(examples)) and len(train) + len(held_out) == 3


def test_it_labels_the_moments_of_a_session_whose_finish_cut_a_stop_string(alice, plain_domain):
    cut_at_finish(session_with_pauses(alice, plain_domain))
    assert len(pause_models.history_examples(plain_domain)) == 3


def edited_at_a_pause(owner, domain) -> ReviewSession:
    """A policy paused after " definitely"; the reviewer replaced it with " probably" (a
    token of their own signals) and the model went on."""
    session = ReviewSession.objects.create(
        owner=owner, domain=domain, input_text="Note.", model_name="tiny",
        status=ReviewSession.GENERATED, text="", generated_ids=[0, 1, 2, 99, *range(4, 9)],
    )  # fmt: skip
    pause = PauseEvent.objects.create(
        session=session, position=4, trigger="Sure", kind="overconfidence", reason="sure",
        halted_at=timezone.now(), resumed_at=timezone.now(),
    )  # fmt: skip
    Edit.objects.create(
        session=session, pause=pause, kind="replace", author=owner, applied=True,
        text_before=" definitely", text_after=" probably",
    )  # fmt: skip
    edited = {
        "token_start": 3, "token_end": 4, "token_ids": [0, 1, 2, 99], "kind": "replace",
        "text": " The patient is probably",
        "tokens": [{"text": " probably", "top1": 0.99, "entropy": 0.01}],
    }  # fmt: skip
    log = [("token", token_event(i, w, 0.5)) for i, w in enumerate(WORDS[:4])]
    log += [("pause", {"pause_id": pause.pk, "position": 4}), ("edited", edited)]
    log += [("token", token_event(i, w, 0.5)) for i, w in enumerate(WORDS) if i >= 4]
    for seq, (kind, payload) in enumerate(log, start=1):
        SessionEvent.objects.create(session=session, seq=seq, type=kind, payload=payload)
    return session


def test_it_learns_from_what_the_model_wrote_not_the_reviewer_s_edit(alice, plain_domain):
    session = edited_at_a_pause(alice, plain_domain)
    assert " probably stable" in pause_models.history_of(session).text  # the final text
    (example,) = pause_models.history_examples(plain_domain)
    assert (example.text_before, example.next_text, example.label) == (
        " The patient is",
        " definitely",
        1,
    )
    assert example.signals == {"top1_prob": 0.5, "entropy": 0.3}  # the model's, not the edit's


def train(*args: str) -> str:
    out = io.StringIO()
    call_command("train_pause_policy", *args, stdout=out)
    return out.getvalue()


def test_it_trains_versions_and_points_a_disabled_policy_at_the_newest(
    alice, plain_domain, model_dir
):
    session_with_pauses(alice, plain_domain)
    printed = train("--domain", plain_domain.slug)
    assert "precision" in printed and "recall" in printed and "pauses per 100 tokens" in printed
    assert "on the domain's recent sessions" in printed and "disabled" in printed
    first = PauseModelVersion.objects.get(domain=plain_domain)
    assert first.version == 1 and first.metrics["replayed_on"] == "sessions"
    assert first.metrics["precision"] > 0 and first.metrics["recall"] > 0
    policy = PausePolicy.objects.get(domain=plain_domain, kind="learned")
    assert not policy.enabled and policy.params["checksum"] == first.checksum
    assert Path(policy.params["model"]).read_bytes() == bytes(first.data)
    assert Path(policy.params["model"]).parent == model_dir

    train("--domain", plain_domain.name, "--threshold", "0.6", "--enable")
    second = PauseModelVersion.objects.get(domain=plain_domain, version=2)
    policy.refresh_from_db()
    assert policy.enabled and policy.params["threshold"] == 0.6
    assert build_policy(policy.to_spec()).threshold == 0.6
    record = AuditRecord.objects.get(action="pause_model_enabled")
    assert record.payload["version"] == 2 and record.payload["checksum"] == second.checksum
    assert set(record.payload["metrics"]) >= {"precision", "recall", "pauses_per_100_tokens"}


def test_it_refuses_an_unknown_domain_or_a_bad_threshold(plain_domain):
    with pytest.raises(CommandError, match="Unknown domain"):
        train("--domain", "no-such-domain")
    with pytest.raises(CommandError, match="between 0 and 1"):
        train("--domain", plain_domain.slug, "--threshold", "1.5")
    assert not PauseModelVersion.objects.exists()


def test_a_worker_writes_a_missing_model_file_back_from_postgres(
    admin_user, plain_domain, model_dir
):
    model, _ = pause_models.train_for(plain_domain)
    version = pause_models.store_version(plain_domain, model, "test")
    policy = pause_models.point_policy(version, None, False, "test")
    path = Path(policy.params["model"])
    path.unlink()
    spec = {**policy.to_spec(), "enabled": True}
    pause_models.ensure_files([spec, {"name": "k", "kind": "keyword", "params": {}}])
    assert path.read_bytes() == bytes(version.data)
    path.unlink()
    session = ReviewSession.objects.create(
        owner=admin_user, domain=plain_domain, input_text="x", model_name="tiny",
        policy_specs=[spec],
    )  # fmt: skip
    pause_models.ensure_files(session.policy_specs)  # what a segment does before its state
    assert path.read_bytes() == bytes(version.data)
    assert build_policy(spec).model.checksum == version.checksum


def test_enabling_it_in_the_admin_is_audited(client, admin_user, plain_domain):
    model, _ = pause_models.train_for(plain_domain)
    version = pause_models.store_version(plain_domain, model, "test")
    policy = pause_models.point_policy(version, None, False, "test")
    assert not AuditRecord.objects.filter(action="pause_model_enabled").exists()
    client.force_login(admin_user)
    form = {
        "name": policy.name, "domain": plain_domain.pk, "action": "pause", "enabled": "on",
        "cooldown": "0", "order": "0",
        param_field_name("model"): policy.params["model"],
        param_field_name("checksum"): version.checksum,
        param_field_name("threshold"): "",
    }  # fmt: skip
    answer = client.post(f"/admin/reviewer/pausepolicy/{policy.pk}/change/", form)
    assert answer.status_code == 302, answer.content.decode()[:3000]
    policy.refresh_from_db()
    assert policy.enabled
    record = AuditRecord.objects.get(action="pause_model_enabled")
    assert record.actor == admin_user.username and record.payload["version"] == 1
    assert record.payload["metrics"]["recall"] == version.metrics["recall"]
    client.post(f"/admin/reviewer/pausepolicy/{policy.pk}/change/", form)  # saved unchanged
    assert AuditRecord.objects.filter(action="pause_model_enabled").count() == 1
