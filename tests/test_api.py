"""The JSON HTTP API: alice drives her session; bob must not reach it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from reviewer.models import AuditRecord, Edit, ReviewSession, SessionEvent
from tests.db_snapshot import snapshot
from tests.session_factory import TEXT, clinical_notes, make_session, stub_worker

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.fixture
def api(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def post(client: Client, url: str, body=None, **extra):
    return client.post(
        url, body if body is not None else {}, content_type="application/json", **extra
    )


# --- start, list, detail, events -----------------------------------------------------------


def test_it_starts_a_session(api, alice, dispatched):
    clinical_notes()
    response = post(
        api, "/api/sessions", {"domain": "Clinical notes", "input": "Fever.", "seed": 3}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "running"
    session = S.objects.get(pk=body["id"])
    assert (session.owner, session.seed, session.input_text) == (alice, 3, "Fever.")
    assert dispatched == [session.pk]


def test_it_starts_a_session_with_decoding_and_limit(api):
    clinical_notes()
    body = {
        "domain": "clinical-notes",
        "input": "Fever.",
        "max_new_tokens": 20,
        "decoding": {"temperature": 0.5},
    }
    response = post(api, "/api/sessions", body)
    session = S.objects.get(pk=response.json()["id"])
    assert session.max_new_tokens == 20
    assert session.decoding["temperature"] == 0.5
    # A seed inside decoding is the session's seed, as one beside it is (the limit too).
    body = {
        "domain": "clinical-notes",
        "input": "Fever.",
        "decoding": {"seed": 5, "max_new_tokens": 7},
    }
    session = S.objects.get(pk=post(api, "/api/sessions", body).json()["id"])
    assert (session.seed, session.max_new_tokens) == (5, 7)


def test_it_caps_a_reviewers_sessions_generating_at_once_and_says_when_to_retry(
    api, alice, settings
):
    settings.CAESURA_REVIEWER_MAX_GENERATING = 2
    clinical_notes()
    start = {"domain": "Clinical notes", "input": "Fever."}
    ids = [post(api, "/api/sessions", start).json()["id"] for _ in range(2)]
    refused = post(api, "/api/sessions", start)
    assert refused.status_code == 429 and refused["Retry-After"] == "5"
    assert "2 of your sessions are generating" in refused.json()["error"]
    assert S.objects.filter(owner=alice).count() == 2  # nothing started
    S.objects.filter(pk=ids[0]).update(status=S.PAUSED)  # a paused session does not count
    third = post(api, "/api/sessions", start)
    assert third.status_code == 201
    resumed = post(api, f"/api/sessions/{ids[0]}/resume", {})
    assert resumed.status_code == 429  # resuming would make three
    assert S.objects.get(pk=ids[0]).status == S.PAUSED
    staff = Client()
    staff.force_login(User.objects.create_user("sam", is_staff=True))
    by_staff = post(staff, f"/api/sessions/{ids[0]}/resume", {})  # staff may drive it, not past
    assert by_staff.status_code == 429 and "alice's sessions" in by_staff.json()["error"]
    S.objects.filter(pk=third.json()["id"]).update(status=S.GENERATED)
    assert post(api, f"/api/sessions/{ids[0]}/resume", {}).status_code == 200


def test_it_refuses_an_unknown_domain(api):
    response = post(api, "/api/sessions", {"domain": "Astrology", "input": "Hi"})
    assert response.status_code == 400
    assert "Unknown domain" in response.json()["error"]


def test_it_refuses_bad_decoding_parameters(api):
    clinical_notes()
    response = post(
        api, "/api/sessions", {"domain": "Clinical notes", "input": "x", "decoding": {"warp": 9}}
    )
    assert response.status_code == 400
    assert "warp" in response.json()["error"]


def test_it_refuses_malformed_json(api):
    response = api.post("/api/sessions", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"error": "Request body is not valid JSON"}


def test_it_refuses_a_key_given_twice_and_changes_nothing(api, alice):
    session = make_session(alice)
    before = snapshot()
    body = '{"start": 4, "end": 11, "text": "woman", "start": 0}'
    response = api.post(f"/api/sessions/{session.pk}/edit", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "error": "Request body is not valid JSON here: the key 'start' appears twice"
    }
    nested = '{"domain": "clinical-notes", "input": "x", "decoding": {"top_k": 1, "top_k": 2}}'
    assert api.post("/api/sessions", nested, content_type="application/json").status_code == 400
    assert snapshot() == before


def test_it_refuses_a_body_that_is_not_an_object(api):
    response = post(api, "/api/sessions", [1, 2])
    assert response.status_code == 400
    assert response.json() == {"error": "Request body must be a JSON object"}


def test_it_lists_only_the_reviewers_own_sessions(api, alice, bob):
    mine = make_session(alice)
    make_session(bob)
    response = api.get("/api/sessions")
    assert response.status_code == 200
    assert [s["id"] for s in response.json()["sessions"]] == [mine.pk]


def test_it_lists_every_session_to_staff(alice, bob, admin_user):
    ids = {make_session(alice).pk, make_session(bob).pk}
    client = Client()
    client.force_login(admin_user)
    assert {s["id"] for s in client.get("/api/sessions").json()["sessions"]} == ids


def test_it_shows_a_session_with_pauses_and_edits(api, alice):
    session = make_session(alice)
    Edit.objects.create(
        session=session, kind="replace", start=4, end=11, text_after="client", author=alice
    )
    body = api.get(f"/api/sessions/{session.pk}").json()
    assert body["id"] == session.pk
    assert (body["status"], body["text"], body["token_ids"]) == (
        "paused",
        TEXT,
        [11, 12, 13, 14, 15],
    )
    assert (body["domain"], body["input"]) == ("Clinical notes", "Fever since Monday.")
    [pause] = body["pauses"]
    assert pause["alternatives"][0]["token_id"] == 42
    assert pause["trigger"] == "manual" and pause["evidence"] == {"entropy": 1.5}
    assert "attention" not in pause
    [edit] = body["edits"]
    assert (edit["kind"], edit["start"], edit["end"], edit["text_after"]) == (
        "replace",
        4,
        11,
        "client",
    )
    assert edit["applied"] is False


def test_it_includes_attention_on_request(api, alice):
    session = make_session(alice)
    body = api.get(f"/api/sessions/{session.pk}?attention=1").json()
    assert body["pauses"][0]["attention"] == {"layers": [[0.5, 0.5]]}


def test_it_hides_another_reviewers_session(api, bob):
    session = make_session(bob)
    response = api.get(f"/api/sessions/{session.pk}")
    assert response.status_code == 404
    assert "not found" in response.json()["error"]


def test_it_lets_staff_see_any_session(alice, admin_user):
    session = make_session(alice)
    client = Client()
    client.force_login(admin_user)
    assert client.get(f"/api/sessions/{session.pk}").status_code == 200


def test_it_lists_the_events_after_a_sequence_number(api, alice):
    session = make_session(alice)
    for seq in (1, 2, 3):
        SessionEvent.objects.create(
            session=session, seq=seq, type="token", payload={"text": f"t{seq}"}
        )
    events = api.get(f"/api/sessions/{session.pk}/events?after=1").json()["events"]
    assert [e["seq"] for e in events] == [2, 3]
    assert events[0] == {"type": "token", "seq": 2, "session": session.pk, "text": "t2"}


def test_it_pages_the_events_by_size_as_well_as_by_count(api, alice, settings):
    settings.CAESURA_EVENTS_PAGE_BYTES = 10_000
    session = make_session(alice)
    row = [0.5] * 2000  # an attention row of about 10 kB: over a page by itself
    for seq in (1, 2, 3):
        SessionEvent.objects.create(
            session=session, seq=seq, type="token", payload={"text": f"t{seq}", "attention": row}
        )
    SessionEvent.objects.create(session=session, seq=4, type="status", payload={"status": "x"})
    seen, after = [], 0
    while events := api.get(f"/api/sessions/{session.pk}/events?after={after}").json()["events"]:
        assert len(events) == 1  # each token event fills a page by itself, and so cuts it
        seen += [e["seq"] for e in events]
        after = events[-1]["seq"]
    assert seen == [1, 2, 3, 4]


def test_it_refuses_a_non_numeric_after(api, alice):
    session = make_session(alice)
    assert api.get(f"/api/sessions/{session.pk}/events?after=soon").status_code == 400


def test_it_hides_another_reviewers_events(api, bob):
    assert api.get(f"/api/sessions/{make_session(bob).pk}/events").status_code == 404


# --- commands --------------------------------------------------------------------------------


def test_it_pauses_a_running_session(api, alice):
    session = make_session(alice, status=S.RUNNING)
    response = post(api, f"/api/sessions/{session.pk}/pause")
    assert response.status_code == 200
    assert response.json() == {"id": session.pk, "status": "running"}
    assert AuditRecord.objects.filter(session=session, action="pause_requested").exists()


def test_it_resumes_a_paused_session(api, alice, dispatched):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 200
    assert response.json()["status"] == "running"
    assert dispatched == [session.pk]
    assert session.pauses.get().outcome == "resumed"


def test_it_refuses_to_resume_a_running_session(api, alice):
    session = make_session(alice, status=S.RUNNING)
    response = post(api, f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 409
    assert response.json() == {"error": "Cannot resume a session that is running"}


def test_it_queues_an_edit(api, alice, dispatched):
    session = make_session(alice)
    response = post(
        api, f"/api/sessions/{session.pk}/edit", {"start": 4, "end": 11, "text": "client"}
    )
    assert response.status_code == 202
    edit = Edit.objects.get(pk=response.json()["edit"])
    assert (edit.kind, edit.text_before, edit.text_after) == ("replace", "patient", "client")
    assert dispatched == [session.pk]


def test_it_refuses_an_edit_outside_the_text(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/edit", {"start": 4, "end": 400, "text": "x"})
    assert response.status_code == 400
    assert "outside the text" in response.json()["error"]
    assert not Edit.objects.exists()


def test_it_refuses_an_edit_without_text(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/edit", {"start": 0, "end": 1})
    assert response.status_code == 400
    assert response.json() == {"error": "text is required"}


def test_it_chooses_an_offered_alternative(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/choose", {"token_id": 42})
    assert response.status_code == 202
    edit = Edit.objects.get(pk=response.json()["edit"])
    assert (edit.kind, edit.token_id, edit.text_after) == ("choose", 42, " cough")


def test_it_refuses_a_token_that_was_not_offered(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/choose", {"token_id": 999})
    assert response.status_code == 400


def test_it_asks_a_worker_for_another_layers_heads_without_changing_anything(
    api, alice, monkeypatch, django_capture_on_commit_callbacks
):
    from reviewer.worker import dispatch

    asked = []
    monkeypatch.setattr(dispatch, "attention", lambda args, holder: asked.append(args))
    session = make_session(alice)
    audited = AuditRecord.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, f"/api/sessions/{session.pk}/attention", {"layer": 0})
    assert response.status_code == 202
    assert asked == [(session.pk, 0)]
    assert AuditRecord.objects.count() == audited  # reading the state is not an action
    session.refresh_from_db()
    assert session.status == "paused"


def test_it_refuses_heads_of_a_layer_that_does_not_exist_or_while_running(api, alice):
    paused = make_session(alice)  # its pause recorded one layer
    assert post(api, f"/api/sessions/{paused.pk}/attention", {"layer": 1}).status_code == 400
    assert post(api, f"/api/sessions/{paused.pk}/attention", {}).status_code == 400
    running = make_session(alice, status="running")
    assert post(api, f"/api/sessions/{running.pk}/attention", {"layer": 0}).status_code == 409


def test_it_rolls_back(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/rollback", {"position": 2})
    assert response.status_code == 202
    edit = Edit.objects.get(pk=response.json()["edit"])
    assert (edit.kind, edit.start, edit.end) == ("truncate", 2, 5)


def test_it_says_when_there_is_nothing_to_roll_back(api, alice):
    session = make_session(alice)
    S.objects.filter(pk=session.pk).update(text="", generated_ids=[])
    response = post(api, f"/api/sessions/{session.pk}/rollback", {"position": 0})
    assert response.status_code == 400
    assert response.json()["error"] == "There is nothing to roll back: no token was generated yet"
    assert not Edit.objects.filter(session=session).exists()


def test_it_refuses_a_non_numeric_position(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/rollback", {"position": "three"})
    assert response.status_code == 400
    assert "position must be a JSON integer" in response.json()["error"]


def test_it_approves_a_generated_session(api, alice):
    session = make_session(alice, status=S.GENERATED)
    response = post(api, f"/api/sessions/{session.pk}/approve", {"comment": "Fine"})
    assert response.status_code == 200
    assert response.json() == {"id": session.pk, "status": "completed"}
    session.refresh_from_db()
    assert session.status == "completed"
    assert session.finished_at is not None


def test_it_keeps_the_decision_comment(api, alice):
    session = make_session(alice, status=S.GENERATED)
    post(api, f"/api/sessions/{session.pk}/approve", {"comment": "Fine"})
    session.refresh_from_db()
    assert session.decision_comment == "Fine"


def test_it_records_the_outcome_of_a_rejected_pause(api, alice):
    session = make_session(alice)
    post(api, f"/api/sessions/{session.pk}/reject", {"comment": "No"})
    assert session.pauses.get().outcome == "rejected"


def test_it_rejects_with_a_comment(api, alice):
    session = make_session(alice, status=S.GENERATED)
    response = post(api, f"/api/sessions/{session.pk}/reject", {"comment": "Wrong drug"})
    assert response.json() == {"id": session.pk, "status": "rejected"}


def test_it_needs_a_comment_to_reject(api, alice):
    session = make_session(alice, status=S.GENERATED)
    assert post(api, f"/api/sessions/{session.pk}/reject").status_code == 400


def test_it_cancels_a_paused_session(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/cancel")
    assert response.json() == {"id": session.pk, "status": "cancelled"}


def test_it_refuses_a_command_for_a_finished_session(api, alice):
    session = make_session(alice, status=S.COMPLETED)
    for command in ("pause", "resume", "cancel", "approve"):
        response = post(api, f"/api/sessions/{session.pk}/{command}")
        assert response.status_code == 409, command
    session.refresh_from_db()
    assert session.status == "completed"


def test_it_refuses_commands_on_another_reviewers_session(api, bob):
    session = make_session(bob)
    assert post(api, f"/api/sessions/{session.pk}/resume").status_code == 404
    session.refresh_from_db()
    assert session.status == "paused"


def test_it_answers_a_repeated_command_id_with_the_first_result(api, alice, dispatched):
    session = make_session(alice)
    url = f"/api/sessions/{session.pk}/resume"
    first = post(api, url, {"command_id": "resume-1"})
    second = post(api, url, {"command_id": "resume-1"})
    assert first.status_code == second.status_code == 200
    assert second.json() == {**first.json(), "repeated": True}
    assert AuditRecord.objects.filter(session=session, action="resume").count() == 1
    assert dispatched == [session.pk]


def test_it_refuses_a_command_id_reused_for_another_command_or_session(api, alice, dispatched):
    """Answering with the first result would tell the client that an approval, a cancel or a
    start it never ran was done."""
    session, other = make_session(alice), make_session(alice)
    assert post(api, f"/api/sessions/{session.pk}/resume", {"command_id": "c-1"}).status_code == 200
    before = snapshot()
    for url, body in [
        (f"/api/sessions/{session.pk}/approve", {"command_id": "c-1", "comment": "ok"}),
        (f"/api/sessions/{other.pk}/resume", {"command_id": "c-1"}),
        ("/api/sessions/999999/resume", {"command_id": "c-1"}),
        ("/api/sessions", {"command_id": "c-1", "domain": "nope", "input": "x"}),
    ]:
        answer = post(api, url, body)
        assert answer.status_code == 409, (url, answer.content)
        assert f"was used for resume of session {session.pk}" in answer.json()["error"]
    assert snapshot() == before


def test_it_refuses_an_overlong_command_id(api, alice):
    session = make_session(alice)
    response = post(api, f"/api/sessions/{session.pk}/resume", {"command_id": "x" * 101})
    assert response.status_code == 400


def test_it_refuses_the_wrong_method(api, alice):
    session = make_session(alice)
    response = api.get(f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert "error" in response.json()
    assert api.delete("/api/sessions").status_code == 405


def test_it_answers_unknown_endpoints_with_json(api):
    for path in ("/api/nothing-here", "/api"):  # /api itself too: no redirect page
        response = api.get(path)
        assert response.status_code == 404, path
        assert "error" in response.json()
