"""Attention gating on the web side: a domain's gate and recall words reach the sessions started
in it (the reviewer's API and the gateway); a request's own gate wins; bad settings, bad anchor
markup and a gate the backend cannot run are refused with a 400 naming the field, and nothing
is created. The admin audits a change and warns where the gate cannot run. The session page
reads the case text without its markup.

Personas: alice reviews clinical notes; root is staff; the "drafter" application calls /v1/."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.test import Client, override_settings

from inference.gating import GateConfig, GateConfigError, parse_anchors
from inference.sink import TokenEvent
from reviewer.lifecycle import application_keys, gateway
from reviewer.models import AuditRecord, Domain, ReviewSession
from reviewer.worker.relay import Relay
from tests.session_factory import clinical_notes, stub_worker
from tests.test_admin_applications import domain_form

pytestmark = pytest.mark.django_db

CASE = "<ANCHOR:diagnosis>Pneumonia</ANCHOR> with <ANCHOR:symptoms>fever and cough</ANCHOR>."


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.fixture
def api(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def gated() -> Domain:
    domain = clinical_notes()
    domain.attention, domain.gate_top_k = "gated", 12
    domain.recall_words_en, domain.recall_words_zh = "history, earlier", "病史，既往"
    domain.save()
    return domain


def start(client: Client, **body) -> tuple[int, dict]:
    body = {"domain": "clinical-notes", "input": "Fever.", **body}
    response = client.post("/api/sessions", json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def test_it_strips_anchor_markup_and_finds_each_span_in_the_clean_text():
    clean, anchors = parse_anchors(CASE + " <RECALL>")
    assert clean == "Pneumonia with fever and cough. "
    assert [(a.name, clean[a.start : a.end]) for a in anchors] == [
        ("diagnosis", "Pneumonia"),
        ("symptoms", "fever and cough"),
    ]


@pytest.mark.parametrize(
    "text, says",
    [
        ("<ANCHOR:a>x<ANCHOR:b>y</ANCHOR></ANCHOR>", "do not nest"),
        ("<ANCHOR:a>never closed", "never closed"),
        ("stray </ANCHOR>", "closes no open anchor"),
        ("<ANCHOR:two words>x</ANCHOR>", "letters, digits"),
    ],
)
def test_it_refuses_bad_anchor_markup_with_a_clear_message(text, says):
    with pytest.raises(ValueError, match=says):
        parse_anchors(text)


def test_it_names_the_field_of_a_bad_gate_setting():
    with pytest.raises(GateConfigError, match="attention.top_k"):
        GateConfig.from_dict({"mode": "gated", "top_k": -1})
    with pytest.raises(GateConfigError, match="warp"):
        GateConfig.from_dict({"warp": 1})
    gate = GateConfig.from_dict({"mode": "gated", "triggers": ["history"]})
    assert gate.gated and GateConfig.from_dict(gate.to_dict()) == gate


def test_it_gives_a_session_its_domains_gate_and_both_languages_recall_words(api, gated):
    status, body = start(api)
    assert status == 201
    attention = ReviewSession.objects.get(pk=body["id"]).decoding["attention"]
    assert attention == {
        "mode": "gated",
        "sinks": 4,
        "window": 64,
        "top_k": 12,
        "wide_top_k": 50,
        "triggers": ["history", "earlier", "病史", "既往"],
    }


def test_it_gives_a_session_in_a_default_domain_full_attention(api):
    clinical_notes()
    status, body = start(api)
    assert status == 201
    assert ReviewSession.objects.get(pk=body["id"]).decoding["attention"]["mode"] == "full"


def test_it_lets_the_request_set_its_own_gate(api, gated):
    status, body = start(api, decoding={"attention": {"mode": "full"}})
    assert status == 201
    attention = ReviewSession.objects.get(pk=body["id"]).decoding["attention"]
    assert attention["mode"] == "full" and attention["top_k"] == 10  # not the domain's 12


@pytest.mark.parametrize(
    "attention, field",
    [
        ({"mode": "gated", "window": 0}, "attention.window"),
        ({"mode": "sparse"}, "attention.mode"),
        ({"mode": "gated", "top_k": 60, "wide_top_k": 50}, "attention.wide_top_k"),
        ({"mode": "gated", "triggers": "history"}, "attention.triggers"),
        ({"sink": 4}, "sink"),
        ("gated", "attention must be an object"),
    ],
)
def test_it_refuses_a_bad_gate_naming_the_field_and_creates_nothing(api, gated, attention, field):
    status, body = start(api, decoding={"attention": attention})
    assert status == 400 and field in body["error"]
    assert not ReviewSession.objects.exists() and not AuditRecord.objects.exists()


def test_it_refuses_bad_anchor_markup_in_the_case_naming_the_input(api, gated):
    status, body = start(api, input="<ANCHOR:diagnosis>Pneumonia")
    assert status == 400 and body["error"].startswith("input:") and "never closed" in body["error"]
    assert not ReviewSession.objects.exists()


@override_settings(CAESURA_BACKEND="vllm")
def test_it_refuses_a_gated_session_where_the_backend_cannot_gate(api, gated):
    status, body = start(api)
    assert status == 400 and "gated attention" in body["error"] and "vllm" in body["error"]
    assert not ReviewSession.objects.exists()
    status, _ = start(api, decoding={"attention": {"mode": "full"}})
    assert status == 201  # the request can still ask for full attention


def test_it_gives_a_gateway_generation_its_domains_gate(gated, monkeypatch):
    monkeypatch.setattr(gateway, "_check_prompt_fits", lambda *args: None)  # no tokenizer
    _, key = application_keys.create("drafter", [gated], "root")
    client = Client(headers={"Authorization": f"Bearer {key}"})
    body = {"model": "caesura:clinical-notes", "input": "Fever.", "background": True}
    response = client.post("/v1/responses", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    session = ReviewSession.objects.get()
    assert session.decoding["attention"]["mode"] == "gated"
    with override_settings(CAESURA_BACKEND="vllm"):
        response = client.post("/v1/responses", json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and "gated attention" in response.json()["error"]["message"]
    assert ReviewSession.objects.count() == 1


def test_it_audits_a_change_of_attention_with_before_and_after(client, admin_user, gated):
    client.force_login(admin_user)
    url = f"/admin/reviewer/domain/{gated.pk}/change/"
    page = client.get(url).content.decode()
    assert 'name="recall_words_zh"' in page and "errornote" not in page  # transformers gates
    assert "&lt;ANCHOR:NAME&gt;" in page  # the markup, as text
    form = domain_form(gated, attention="full", recall_words_zh="上次")
    assert client.post(url, form).status_code == 302
    record = AuditRecord.objects.get(action="domain_attention_changed")
    assert record.payload["before"]["attention"] == "gated"
    assert record.payload["after"]["attention"] == "full"
    assert record.payload["after"]["recall_words_zh"] == "上次"
    assert client.post(url, domain_form(Domain.objects.get())).status_code == 302
    assert AuditRecord.objects.count() == 1  # saving without a change audits nothing


def test_it_refuses_a_narrower_wide_gate_in_the_admin(client, admin_user, gated):
    client.force_login(admin_user)
    url = f"/admin/reviewer/domain/{gated.pk}/change/"
    response = client.post(url, domain_form(gated, gate_top_k=80, gate_wide_top_k=50))
    assert response.status_code == 200 and "wide_top_k must be" in response.content.decode()
    assert Domain.objects.get().gate_top_k == 12 and not AuditRecord.objects.exists()


@override_settings(CAESURA_BACKEND="vllm")
def test_it_warns_in_the_admin_where_the_backend_cannot_gate(client, admin_user, gated):
    client.force_login(admin_user)
    page = client.get(f"/admin/reviewer/domain/{gated.pk}/change/").content.decode()
    assert "errornote" in page and "vllm backend does not" in page


@pytest.mark.model  # the page maps the case text onto the model's tokens
def test_it_shows_the_case_text_without_markup_and_tells_the_page_the_anchors(client, alice):
    from tests.session_factory import make_session

    session = make_session(alice)
    ReviewSession.objects.filter(pk=session.pk).update(input_text=CASE)
    client.force_login(alice)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "ANCHOR" not in page
    assert "Pneumonia with fever and cough." in page
    data = page.split('id="page-data"')[1]
    assert '"caseAnchors": [{"name": "diagnosis", "start": 0, "end": 9}' in data


@dataclass(frozen=True)
class GatedToken(TokenEvent):
    """A token of a gated run, as the engine reports one: on a sampled step, the hit rate."""

    gate_hit_rate: float | None = None
    gate_kept: int = 0


def test_it_exports_the_hit_rate_of_the_gated_steps_the_engine_measured(alice):
    from tests.session_factory import make_session
    from tests.test_metrics import scrape, value
    from tests.test_relay import SIGNALS

    session = make_session(alice, status=ReviewSession.RUNNING)
    relay = Relay(session, None, lambda state: None, lambda *args: None)
    name, labels = "caesura_dynamic_mask_hit_rate", {"domain": "clinical-notes"}
    before = scrape()
    for position, rate in enumerate([0.97, None, None, 0.88]):
        relay.on_token(GatedToken(position, 1, "x", position, SIGNALS, 0, gate_hit_rate=rate))
    after = scrape()
    grew = value(after, f"{name}_count", **labels) - value(before, f"{name}_count", **labels)
    added = value(after, f"{name}_sum", **labels) - value(before, f"{name}_sum", **labels)
    assert grew == 2 and added == pytest.approx(0.97 + 0.88)
    under_09 = {**labels, "le": "0.9"}
    assert (
        value(after, f"{name}_bucket", **under_09) - value(before, f"{name}_bucket", **under_09)
        == 1
    )
    text = Client().get("/metrics").content.decode()
    assert "share of the full attention mass the gated positions hold" in text


def test_it_marks_the_key_spans_of_the_clinical_demo_cases_and_keeps_the_demo_full(tmp_path):
    from reviewer.demo.demo_data import CASES
    from reviewer.demo.loading import load_demo_data

    for case in CASES["clinical-note"]:
        clean, anchors = parse_anchors(case["input"])
        assert 4 <= len(anchors) <= 5 and "<" not in clean
        assert {"diagnosis", "findings", "follow-up"} <= {a.name for a in anchors}
    load_demo_data(tmp_path / "demo")
    assert set(Domain.objects.values_list("attention", flat=True)) == {"full"}


def test_it_classifies_the_case_by_its_words_not_its_markup(api, gated):
    from reviewer.lifecycle import task_types

    status, body = start(api, input=CASE)
    assert status == 201
    session = ReviewSession.objects.get(pk=body["id"])
    assert session.input_text == CASE  # the engine reads the anchors
    assert session.task_type == task_types.choose(parse_anchors(CASE)[0])[0]


@pytest.mark.parametrize(
    "triggers, says",
    [
        (["his\x00tory"], "attention.triggers[]"),
        (["x" * 101], "limit is 100"),
        (["w"] * 101, "limit"),
    ],
)
def test_it_refuses_recall_words_it_could_not_store(api, gated, triggers, says):
    status, body = start(api, decoding={"attention": {"mode": "gated", "triggers": triggers}})
    assert status == 400 and says in body["error"]
    assert not ReviewSession.objects.exists()


def new_session_form(client: Client, domain: Domain):
    form = {"domain": domain.pk, "input_text": CASE, "max_new_tokens": 20}
    return client.post("/sessions/new", form)


def test_it_gives_a_session_from_the_reviewers_form_its_domains_gate(client, alice, gated):
    client.force_login(alice)
    assert new_session_form(client, gated).status_code == 302
    session = ReviewSession.objects.get()
    assert session.decoding["attention"]["mode"] == "gated"
    with override_settings(CAESURA_BACKEND="vllm"):
        response = new_session_form(client, gated)
    assert response.status_code == 200 and "gated attention needs" in response.content.decode()
    assert ReviewSession.objects.count() == 1


@pytest.mark.model  # the model's tokenizer maps the case onto the prompt
def test_it_finds_an_anchored_case_among_the_prompts_tokens(alice):
    from inference.prompt import encode_prompt
    from reviewer.analytics.case_attention import case_positions
    from reviewer.web.tokenizer import tokenizer
    from tests.session_factory import make_session

    clean = parse_anchors(CASE)[0]
    session = make_session(alice)
    session.input_text, session.prompt_ids = (
        CASE,
        encode_prompt(tokenizer(), clean, "Write a note."),
    )
    assert case_positions(session) and len(case_positions(session)) >= 5
