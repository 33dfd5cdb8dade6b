"""Hostile or sloppy input to the HTTP API: a clear 400, never a 500, and nothing stored."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings

from reviewer.models import ReviewSession
from reviewer.web.auth import issue_token
from tests.db_snapshot import snapshot
from tests.session_factory import clinical_notes, make_session, stub_worker

pytestmark = pytest.mark.django_db
S = ReviewSession

OVERFLOWING = ["1e400", "-1e400", "Infinity", "-Infinity", "NaN"]


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.fixture
def api(alice) -> Client:
    return Client(headers={"Authorization": f"Token {issue_token(alice)}"})


@pytest.fixture
def paused(alice) -> ReviewSession:
    clinical_notes().glossaries.create(name="Terms").terms.create(term="fever", preferred="pyrexia")
    return make_session(alice)


def post_raw(client: Client, url: str, body: str):
    return client.post(url, body, content_type="application/json")


def with_raw(body: dict, field: str, raw: str) -> str:
    """The body as JSON text with one field's value written verbatim (e.g. 1e400, NaN)."""
    marker = "__RAW__"
    return json.dumps({**body, field: marker}).replace(f'"{marker}"', raw)


def refused(response, fragment: str = "") -> str:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    message = response.json()["error"]
    assert fragment in message
    return message


START = {"domain": "Clinical notes", "input": "Fever since Monday."}
EDIT = {"start": 4, "end": 11, "text": "client"}
COMMAND_BODIES = {
    "edit": EDIT,
    "rollback": {"position": 2},
    "choose": {"token_id": 42},
    "attention": {"layer": 0},
}
INTEGER_FIELDS = [
    ("start", "seed"),
    ("start", "max_new_tokens"),
    ("edit", "start"),
    ("edit", "end"),
    ("edit", "glossary_term"),
    ("rollback", "position"),
    ("choose", "token_id"),
    ("attention", "layer"),
]


def url_and_body(command: str, session: ReviewSession) -> tuple[str, dict]:
    if command == "start":
        return "/api/sessions", START
    return f"/api/sessions/{session.pk}/{command}", COMMAND_BODIES[command]


@pytest.mark.parametrize("raw", OVERFLOWING)
@pytest.mark.parametrize("command, field", INTEGER_FIELDS)
def test_it_refuses_an_overflowing_number_in_any_integer_field(api, paused, command, field, raw):
    url, body = url_and_body(command, paused)
    before = snapshot()
    response = post_raw(api, url, with_raw(body, field, raw))
    refused(response)
    assert snapshot() == before


@pytest.mark.parametrize("raw", ["2.5", "3.0", "true", '"3"', "[3]", '{"n": 3}'])
@pytest.mark.parametrize("command, field", INTEGER_FIELDS)
def test_it_takes_json_integers_only(api, paused, command, field, raw):
    url, body = url_and_body(command, paused)
    before = snapshot()
    message = refused(post_raw(api, url, with_raw(body, field, raw)))
    assert field in message and "integer" in message
    assert snapshot() == before


@pytest.mark.parametrize("command, field", INTEGER_FIELDS)
def test_it_refuses_an_integer_outside_the_field_range(api, paused, command, field):
    url, body = url_and_body(command, paused)
    before = snapshot()
    for value in (-1, 2**64, 10**40):
        refused(post_raw(api, url, with_raw(body, field, str(value))), field)
    assert snapshot() == before


@pytest.mark.parametrize("field", ["temperature", "top_p", "repetition_penalty"])
@pytest.mark.parametrize("raw", OVERFLOWING)
def test_it_refuses_a_non_finite_decoding_number(api, paused, field, raw):
    clinical_notes()
    before = snapshot()
    body = json.dumps({**START, "decoding": {field: "__RAW__"}}).replace('"__RAW__"', raw)
    refused(post_raw(api, "/api/sessions", body))
    assert snapshot() == before


@pytest.mark.parametrize("field", ["top_k", "top_alternatives"])
@pytest.mark.parametrize("value", [2.5, 3.0, True, "3"])
def test_it_refuses_a_decoding_integer_that_is_not_an_integer(api, paused, field, value):
    before = snapshot()
    response = api.post(
        "/api/sessions", {**START, "decoding": {field: value}}, content_type="application/json"
    )
    message = refused(response, field)
    assert "integer" in message
    assert snapshot() == before


@pytest.mark.parametrize(
    "decoding", [{"temperature": 1e-40}, {"top_p": 1e-320}, {"repetition_penalty": 1e-320}]
)
def test_it_refuses_decoding_values_the_sampler_cannot_draw_with(api, paused, decoding):
    before = snapshot()
    response = api.post(
        "/api/sessions", {**START, "decoding": decoding}, content_type="application/json"
    )
    refused(response, next(iter(decoding)))
    assert snapshot() == before


def test_it_still_takes_an_integer_for_a_decoding_number(api, paused):
    response = api.post(
        "/api/sessions",
        {**START, "decoding": {"temperature": 1, "top_k": 5}},
        content_type="application/json",
    )
    assert response.status_code == 201
    assert S.objects.get(pk=response.json()["id"]).decoding["top_k"] == 5


@pytest.mark.parametrize(
    "field, value",
    [
        ("input", "\x00"),
        ("input", ["Fever"]),
        ("input", 3),
        ("domain", ["Clinical notes"]),
        ("domain", {"name": "Clinical notes"}),
        ("domain", "x" * 1000),
        ("domain", "Clinical\x00notes"),
        ("task_type", ["open"]),
        ("task_type", "open" * 1000),
        ("task_type", "astrology"),
        ("command_id", ["c1"]),
        ("command_id", 7),
        ("command_id", "c\x00"),
        ("decoding", [1]),
        ("decoding", "hot"),
    ],
)
def test_it_refuses_a_start_argument_of_the_wrong_type_or_size(api, paused, field, value):
    before = snapshot()
    response = api.post("/api/sessions", {**START, field: value}, content_type="application/json")
    refused(response, field)
    assert snapshot() == before


@pytest.mark.parametrize("field", ["input", "domain", "command_id", "task_type"])
def test_it_refuses_a_lone_surrogate_in_a_start_string(api, paused, field):
    before = snapshot()
    refused(post_raw(api, "/api/sessions", with_raw(START, field, r'"Fever \ud800"')), field)
    assert snapshot() == before


@override_settings(CAESURA_MAX_INPUT_CHARS=50)
def test_it_bounds_the_input_text_and_says_the_limit(api, paused):
    before = snapshot()
    message = refused(api.post("/api/sessions", {**START, "input": "x" * 51}, "application/json"))
    assert "50" in message and "input" in message
    assert snapshot() == before
    ok = api.post("/api/sessions", {**START, "input": "x" * 50}, "application/json")
    assert ok.status_code == 201


@override_settings(CAESURA_MAX_EDIT_CHARS=20)
def test_it_bounds_the_replacement_text_of_an_edit_and_says_the_limit(api, paused):
    url = f"/api/sessions/{paused.pk}/edit"
    before = snapshot()
    message = refused(api.post(url, {**EDIT, "text": "y" * 21}, "application/json"))
    assert "20" in message and "text" in message
    assert snapshot() == before
    assert api.post(url, {**EDIT, "text": "y" * 20}, "application/json").status_code == 202


@pytest.mark.parametrize("raw", [r'"\ud800"', r'"a\u0000b"', "[]", "{}", "7"])
def test_it_refuses_a_replacement_text_that_cannot_be_stored(api, paused, raw):
    before = snapshot()
    refused(post_raw(api, f"/api/sessions/{paused.pk}/edit", with_raw(EDIT, "text", raw)), "text")
    assert snapshot() == before


@pytest.mark.parametrize("command", ["approve", "reject"])
@pytest.mark.parametrize("raw", [r'"\udfff"', r'"\u0000"', "[]", "1", '"' + "c" * 20001 + '"'])
def test_it_refuses_a_decision_comment_that_is_not_a_storable_string(api, alice, command, raw):
    session = make_session(alice, status=S.GENERATED)
    before = snapshot()
    body = with_raw({"comment": ""}, "comment", raw)
    refused(post_raw(api, f"/api/sessions/{session.pk}/{command}", body), "comment")
    assert snapshot() == before


def test_it_rolls_back_to_a_position_given_as_a_json_integer_only(api, paused):
    url = f"/api/sessions/{paused.pk}/rollback"
    before = snapshot()
    refused(api.post(url, {"position": "2"}, "application/json"), "position")
    assert snapshot() == before
    assert api.post(url, {"position": 2}, "application/json").status_code == 202


def test_it_refuses_json_nested_too_deeply(api, paused):
    before = snapshot()
    body = '{"position": ' + "[" * 100_000 + "]" * 100_000 + "}"
    refused(post_raw(api, f"/api/sessions/{paused.pk}/rollback", body))
    assert snapshot() == before


@pytest.mark.parametrize("query", ["after=1e400", "after=-1", f"after={10**40}", "after=%00"])
def test_it_refuses_a_bad_after_in_the_events_query(api, paused, query):
    refused(api.get(f"/api/sessions/{paused.pk}/events?{query}"), "after")


@pytest.mark.parametrize("query", ["limit=inf", "limit=-3", f"limit={10**40}"])
def test_it_refuses_a_bad_list_limit(api, paused, query):
    refused(api.get(f"/api/sessions?{query}"), "limit")


def test_it_answers_a_session_id_beyond_any_integer_column_with_404(api):
    huge = 10**30
    assert api.get(f"/api/sessions/{huge}").status_code == 404
    assert post_raw(api, f"/api/sessions/{huge}/resume", "{}").status_code == 404
