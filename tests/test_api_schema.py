"""The OpenAPI description at /api/schema describes every API URL, method and command, with
the limits the server enforces."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern
from jsonschema import ValidationError as Undescribed
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate
from pydantic import ValidationError

from inference.config import SamplingParams
from reviewer.gateway import schemas as gateway_schemas
from reviewer.gateway import urls as gateway_urls
from reviewer.web import openapi, replies, urls
from reviewer.web.command_table import COMMANDS
from tests.floor_factory import gateway_session
from tests.session_factory import clinical_notes, make_session, stub_worker

pytestmark = pytest.mark.django_db


def api_routes() -> dict[str, set[str]]:
    """Every API URL the app routes, as an OpenAPI path, with the methods its view takes."""
    routes = {}
    for pattern in urls.urlpatterns:
        route = str(pattern.pattern)
        if not isinstance(pattern, URLPattern) or not route.startswith("api/"):
            continue
        if route.startswith("^"):  # the catch-all that answers JSON 404s
            continue
        path = "/" + re.sub(r"<\w+:(\w+)>", r"{\1}", route)
        routes[path] = {method.lower() for method in pattern.callback.methods}
    return routes


def gateway_routes() -> dict[str, set[str]]:
    """Every /v1/ URL the gateway routes, with the method its view takes."""
    routes = {}
    for pattern in gateway_urls.urlpatterns:
        route = str(pattern.pattern)
        if route.startswith("^"):  # the catch-all that answers OpenAI-shaped 404s
            continue
        path = "/v1/" + re.sub(r"<\w+:(\w+)>", r"{\1}", route)
        routes[path] = {method.lower() for method in pattern.callback.methods}
    return routes


def described(prefix: str) -> dict[str, set[str]]:
    return {
        path: {m for m in item if m in ("get", "post", "put", "patch", "delete")}
        for path, item in openapi.description()["paths"].items()
        if path.startswith(prefix)
    }


def refs(value) -> list[str]:
    if isinstance(value, dict):
        own = [value["$ref"]] if "$ref" in value else []
        return own + [r for v in value.values() for r in refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in refs(v)]
    return []


def test_it_serves_the_description_as_json_without_a_login():
    response = Client().get("/api/schema")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["openapi"].startswith("3.")
    assert response.json()["paths"] == openapi.description()["paths"]


def test_it_refuses_to_take_anything_at_the_schema_url():
    response = Client().post("/api/schema", {}, content_type="application/json")
    assert response.status_code == 405
    assert "error" in response.json()


def test_it_describes_every_api_url_with_its_methods():
    routes = api_routes()
    assert "/api/sessions/{session_id}/edit" in routes  # the route walk found the commands
    assert described("/api/") == routes


def test_it_describes_every_gateway_url_with_its_methods():
    routes = gateway_routes()
    assert routes["/v1/responses/{response_id}/cancel"] == {"post"}
    assert described("/v1/") == routes
    assert set(described("")) == set(described("/api/")) | set(routes)


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1/chat/completions", gateway_schemas.ChatRequest),
        ("/v1/completions", gateway_schemas.CompletionRequest),
        ("/v1/responses", gateway_schemas.ResponseRequest),
    ],
)
def test_it_describes_each_gateway_body_from_the_model_that_checks_it(path, model):
    spec = openapi.description()
    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    schema = spec["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    own = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, nested in own.pop("$defs", {}).items():
        assert spec["components"]["schemas"][name] == nested
    assert schema == own
    assert set(schema["required"]) == {n for n, f in model.model_fields.items() if f.is_required()}
    errors = spec["paths"][path]["post"]["responses"]
    assert {"400", "401", "404", "413", "429"} <= set(errors)
    assert errors["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/OpenAIError"
    }


def test_it_describes_the_gateways_limits_as_it_enforces_them():
    chat = openapi.description()["components"]["schemas"]["ChatRequest"]["properties"]
    top = next(s for s in chat["top_logprobs"]["anyOf"] if s["type"] == "integer")
    assert (top["minimum"], top["maximum"]) == (0, 20)
    assert chat["messages"]["maxItems"] == gateway_schemas.MAX_MESSAGES


def test_it_keeps_the_api_and_gateway_schema_names_apart():
    from reviewer.gateway import openapi as gateway_openapi

    spec = openapi.description()
    own = set(openapi.model_schemas())
    assert {"SessionSummary", "Session", "Decoding", "CommandResult", "Error", "EditBody"} <= own
    assert not own & set(gateway_openapi.components())
    assert set(spec["components"]["schemas"]) == own | set(gateway_openapi.components())


def body_schema(spec: dict, path: str) -> dict:
    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return spec["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]


def plain(schema: dict) -> dict:
    """An optional field's own schema: the branch of anyOf that is not null."""
    return next((s for s in schema.get("anyOf", ()) if s.get("type") != "null"), schema)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_it_describes_every_command_with_its_arguments(name):
    command = COMMANDS[name]
    spec = openapi.description()
    operation = spec["paths"][f"/api/sessions/{{session_id}}/{name}"]["post"]
    schema = body_schema(spec, f"/api/sessions/{{session_id}}/{name}")
    required, optional = command.body.argument_names()
    assert set(schema["properties"]) == {*required, *optional, "command_id"}
    assert set(schema.get("required", [])) == set(required)
    assert operation["requestBody"]["required"] == bool(required)
    assert str(command.status) in operation["responses"]


def test_it_names_the_arguments_each_command_has_always_taken():
    names = {name: c.body.argument_names() for name, c in COMMANDS.items()}
    assert names["edit"] == (["start", "end", "text"], ["glossary_term", "seen_length", "seen"])
    assert names["rollback"] == (["position"], ["seen_length"])
    assert names["choose"] == (["token_id"], ["seen_length"])
    assert names["approve"] == ([], ["comment"])
    assert names["reject"] == (["comment"], [])
    assert names["correct_task"] == (["task_type"], [])
    assert names["pause"] == ([], [])


def test_it_describes_integer_fields_as_integers_with_their_range():
    spec = openapi.description()
    position = body_schema(spec, "/api/sessions/{session_id}/rollback")["properties"]["position"]
    assert (position["type"], position["minimum"], position["maximum"]) == ("integer", 0, 2**31 - 1)
    seed = plain(body_schema(spec, "/api/sessions")["properties"]["seed"])
    assert (seed["type"], seed["minimum"], seed["maximum"]) == ("integer", 0, 2**63 - 1)


@override_settings(CAESURA_MAX_EDIT_CHARS=123, CAESURA_MAX_INPUT_CHARS=456)
def test_it_describes_the_configured_text_limits():
    spec = openapi.description()
    edit = body_schema(spec, "/api/sessions/{session_id}/edit")
    start = body_schema(spec, "/api/sessions")
    assert edit["properties"]["text"]["maxLength"] == 123
    assert start["properties"]["input"]["maxLength"] == 456
    assert start["required"] == ["domain", "input"]


def test_it_describes_optional_fields_on_the_field_not_inside_any_of():
    components = openapi.description()["components"]["schemas"]
    seed = components["StartBody"]["properties"]["seed"]
    assert seed["description"].startswith("Same seed, same text")
    for name, schema in components.items():
        for field, prop in schema.get("properties", {}).items():
            hidden = [b for b in prop.get("anyOf", ()) if "description" in b]
            assert not hidden, f"{name}.{field}"


def test_it_describes_every_sampling_parameter_with_its_json_type():
    decoding = openapi.description()["components"]["schemas"]["Decoding"]
    kinds = {"int": "integer", "GateConfig": "object"}
    expected = {f.name: kinds.get(str(f.type), "number") for f in fields(SamplingParams)}
    assert {name: plain(p)["type"] for name, p in decoding["properties"].items()} == expected
    assert decoding["additionalProperties"] is False


def test_it_resolves_every_reference_and_names_each_operation_once():
    spec = openapi.description()
    for ref in refs(spec):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in spec["components"]["schemas"], ref
    operations = [
        op for item in spec["paths"].values() for m, op in item.items() if m in ("get", "post")
    ]
    assert any(op.get("tags") == ["gateway"] for op in operations)
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids))
    assert all(op["responses"] for op in operations)


# --- answers ---------------------------------------------------------------------------------


def test_it_serves_a_valid_openapi_3_1_description():
    validate(openapi.description())  # raises, naming the place, where it is not


def as_modelled(name: str, answer: dict) -> None:
    getattr(replies, name).model_validate(answer)


def as_served(spec: dict, name: str, answer: dict) -> None:
    served = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    OAS31Validator(served).validate(answer)


def test_it_answers_in_the_shapes_it_describes(alice, monkeypatch):
    stub_worker(monkeypatch)
    clinical_notes()
    spec = openapi.description()

    def holds(name: str, answer: dict) -> None:
        as_modelled(name, answer)
        as_served(spec, name, answer)

    api = Client()
    api.force_login(alice)

    def post(url: str, body: dict) -> dict:
        return api.post(url, body, content_type="application/json").json()

    started = post("/api/sessions", {"domain": "clinical-notes", "input": "Fever.", "seed": 3})
    holds("CommandResult", started)
    session = make_session(alice).pk
    edited = post(f"/api/sessions/{session}/edit", {"start": 0, "end": 1, "text": "A"})
    assert edited["edit"] > 0
    holds("CommandResult", edited)
    post(f"/api/sessions/{session}/correct_task", {"task_type": "open", "command_id": "c1"})
    again = post(f"/api/sessions/{session}/correct_task", {"task_type": "open", "command_id": "c1"})
    assert again["repeated"] is True
    holds("CommandResult", again)
    clinical_notes().reviewers.add(alice)
    waiting = gateway_session().pk
    claimed = post(f"/api/sessions/{waiting}/claim", {})
    assert claimed["claimed_by"] == "alice" and claimed["claim_expires_at"]
    holds("CommandResult", claimed)
    holds("Session", api.get(f"/api/sessions/{waiting}").json())

    detail = api.get(f"/api/sessions/{session}?attention=1").json()
    assert detail["pauses"] and detail["edits"] and detail["task_correction"]
    holds("Session", detail)
    holds("Session", api.get(f"/api/sessions/{started['id']}").json())
    holds("SessionList", api.get("/api/sessions").json())
    holds("Events", api.get(f"/api/sessions/{session}/events").json())
    holds("IssuedToken", post("/api/token", {}))
    holds("Error", post(f"/api/sessions/{session}/rollback", {}))

    # The models and the description name every key: one they do not know fails here.
    with pytest.raises(ValidationError):
        as_modelled("Session", {**detail, "undescribed": 1})
    with pytest.raises(Undescribed):
        as_served(spec, "Session", {**detail, "undescribed": 1})


def test_it_serves_the_description_to_get_only(client):
    """HEAD and OPTIONS are refused as on every other endpoint: the ASGI server sent a HEAD
    answer's body, which a client keeping the connection read as its next answer."""
    for method in ("head", "options", "post"):
        answer = getattr(client, method)("/api/schema")
        assert answer.status_code == 405 and answer["Allow"] == "GET", method
    assert client.get("/api/schema").status_code == 200
