"""The reviewer UI's pages: list, new session, session page, audit timeline, vendored Plotly."""

from __future__ import annotations

import json

import pytest

from reviewer.lifecycle import audit
from reviewer.models import ReviewSession
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db


def page_data(response) -> dict:
    html = response.content.decode()
    start = html.index('id="page-data"')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(body)


def test_it_lists_only_the_reviewers_sessions_and_filters_by_status(client, alice, bob):
    paused = make_session(alice)
    done = make_session(alice, status=ReviewSession.COMPLETED)
    foreign = make_session(bob)
    client.force_login(alice)

    everything = client.get("/").content.decode()
    assert f'href="/sessions/{paused.pk}/"' in everything
    assert f'href="/sessions/{done.pk}/"' in everything
    assert f'href="/sessions/{foreign.pk}/"' not in everything

    only_paused = client.get("/", {"status": "paused"}).content.decode()
    assert f'href="/sessions/{paused.pk}/"' in only_paused
    assert f'href="/sessions/{done.pk}/"' not in only_paused


@pytest.mark.model  # the tokenizer counts the prompt
def test_it_starts_a_session_from_the_form_and_opens_its_page(client, alice, plain_domain):
    client.force_login(alice)
    assert client.get("/sessions/new").status_code == 200
    response = client.post(
        "/sessions/new",
        {"domain": plain_domain.pk, "input_text": "Chest pain.", "seed": 5, "max_new_tokens": 12},
    )
    created = ReviewSession.objects.get(owner=alice)
    assert response.status_code == 302 and response.url == f"/sessions/{created.pk}/"
    assert (created.seed, created.max_new_tokens, created.status) == (5, 12, "running")


@pytest.mark.model  # the tokenizer counts the prompt
def test_it_lets_the_reviewer_choose_the_task_type_and_shows_it_with_its_decoding(
    client, alice, plain_domain
):
    client.force_login(alice)
    form = {"domain": plain_domain.pk, "input_text": "Chest pain.", "max_new_tokens": 12}
    client.post("/sessions/new", {**form, "task_type": "reasoning"})
    created = ReviewSession.objects.get(owner=alice)
    assert (created.task_type, created.task_source) == ("reasoning", "override")
    page = client.get(f"/sessions/{created.pk}/").content.decode()
    shown = page[page.index('id="task-type"') :].split("</p>")[0]
    assert "Reasoning" in shown and "chosen" in shown
    assert f"temperature {created.decoding['temperature']}" in shown


@pytest.mark.model  # the tokenizer counts the prompt
def test_it_classifies_the_task_type_when_the_reviewer_leaves_it_automatic(
    client, alice, plain_domain
):
    client.force_login(alice)
    form = {"domain": plain_domain.pk, "input_text": "Chest pain.", "max_new_tokens": 12}
    client.post("/sessions/new", {**form, "task_type": ""})
    created = ReviewSession.objects.get(owner=alice)
    assert created.task_source == "classifier" and created.task_type in {
        "deterministic",
        "open",
        "reasoning",
    }


def test_it_shows_the_form_again_with_the_error_when_input_is_missing(client, alice, plain_domain):
    client.force_login(alice)
    response = client.post("/sessions/new", {"domain": plain_domain.pk, "max_new_tokens": 12})
    assert response.status_code == 200
    assert not ReviewSession.objects.exists()
    assert b'class="error"' in response.content


@pytest.mark.model  # the tokenizer counts the prompt
def test_it_gives_the_session_page_its_glossary_and_labels(client, alice, plain_domain):
    session = make_session(alice)
    session.domain = plain_domain
    session.save()
    client.force_login(alice)
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["session"] == session.pk and data["status"] == "paused"
    assert [t["term"] for t in data["glossary"]] == ["high blood pressure"]
    assert data["labels"]["pause"] == "Pause"


@pytest.mark.model  # the tokenizer counts the prompt
def test_it_translates_the_page_labels_for_chinese_readers(client, alice):
    session = make_session(alice)
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    assert '<html lang="zh-hans">' in response.content.decode()


def test_it_answers_not_found_for_another_reviewers_session(client, alice, bob):
    session = make_session(alice)
    client.force_login(bob)
    page = client.get(f"/sessions/{session.pk}/")
    assert page.status_code == 404 and b"Session not found" in page.content
    assert client.get(f"/sessions/{session.pk}/audit").status_code == 404


def test_it_tells_the_audit_records_as_a_timeline(client, alice):
    session = make_session(alice)
    audit.append(
        "paused", "engine", session, {"trigger": "Dosage", "reason": "dose", "position": 3}
    )
    audit.append("approve", "alice", session, {"comment": "Checked"})
    client.force_login(alice)
    entries = client.get(f"/sessions/{session.pk}/audit").json()["entries"]
    assert [e["action"] for e in entries] == ["Paused", "Approved"]
    assert entries[0]["detail"] == "Dosage: dose" and entries[1]["detail"] == "Checked"


def test_it_serves_plotly_from_the_installed_package(client):
    response = client.get("/vendor/plotly.min.js")
    assert response.status_code == 200
    head = b"".join(response.streaming_content)[:2000]
    assert b"plotly" in head.lower()


def test_it_lists_only_the_domains_the_reviewer_reviews_and_every_domain_to_staff(
    client, alice, admin_user
):
    from reviewer.models import Domain

    def domain(name: str, specialty: str) -> Domain:
        slug = name.lower().replace(" ", "-")
        return Domain.objects.create(name=name, slug=slug, specialty=specialty, system_prompt="-")

    clinical, contract = domain("Clinical note", "medical"), domain("Contract clause", "legal")
    clinical.reviewers.add(alice)

    def listed(user) -> str:
        client.force_login(user)
        page = client.get("/").content.decode()
        return page[page.index('class="domains"') :].split("</ul>")[0]

    mine = listed(alice)
    assert clinical.name in mine and contract.name not in mine
    everything = listed(admin_user)
    assert clinical.name in everything and contract.name in everything


@pytest.mark.model  # the page reads the prompt's tokens with the tokenizer (no prompt ids yet)
def test_it_says_why_no_text_comes_while_the_worker_loads_its_model(client, alice, monkeypatch):
    from reviewer.web import views

    client.force_login(alice)
    monkeypatch.setattr(views, "engine_loading", lambda: True)
    waiting = make_session(alice, status=ReviewSession.RUNNING)
    ReviewSession.objects.filter(pk=waiting.pk).update(generated_ids=[], text="")
    assert 'id="engine-loading"' in client.get(f"/sessions/{waiting.pk}/").content.decode()
    writing = make_session(alice, status=ReviewSession.RUNNING)  # its first tokens came
    assert 'id="engine-loading"' not in client.get(f"/sessions/{writing.pk}/").content.decode()
    monkeypatch.setattr(views, "engine_loading", lambda: False)
    assert 'id="engine-loading"' not in client.get(f"/sessions/{waiting.pk}/").content.decode()


def page_of(client, session) -> str:
    return client.get(f"/sessions/{session.pk}/").content.decode()


def opening_tag(page: str, element_id: str) -> str:
    start = page.rindex("<", 0, page.index(f'id="{element_id}"'))
    return page[start : page.index(">", start) + 1]


@pytest.mark.model  # the tokenizer counts the prompt
def test_why_it_paused_links_only_once_there_is_a_graph_to_show(client, alice):
    from reviewer.models import AuditGraph

    session = make_session(alice, status=ReviewSession.GENERATED)
    client.force_login(alice)
    assert " hidden" in opening_tag(page_of(client, session), "audit-graphs-link")
    record = audit.append("paused", "engine", session, {"trigger": "manual", "position": 3})
    AuditGraph.objects.create(session=session, subject="pause", record=record, position=3)
    assert " hidden" not in opening_tag(page_of(client, session), "audit-graphs-link")


@pytest.mark.model  # the tokenizer counts the prompt
def test_the_session_page_explains_top_k_0_and_lists_home_and_end(client, alice):
    unlimited = make_session(alice, decoding={"temperature": 0.7, "top_k": 0})
    limited = make_session(alice, decoding={"temperature": 0.7, "top_k": 50})
    client.force_login(alice)
    page = page_of(client, unlimited)
    assert 'id="top-k-note"' in page and "no limit on the candidates" in page
    assert 'id="top-k-note"' not in page_of(client, limited)
    keys = page[page.index('id="keys-help"') :].split("</dialog>")[0]
    assert "<kbd>Home</kbd> / <kbd>End</kbd>" in keys and "First / last word" in keys
    # Entropy has its unit on the page, as in the reasons and the audit graphs.
    assert page_data(client.get(f"/sessions/{unlimited.pk}/"))["labels"]["nats"] == "%(value)s nats"
    # No claim button is rendered shown, so neither is its key.
    assert "claim-key" not in page  # a reviewer's own session has no claim bar at all
