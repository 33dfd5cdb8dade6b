"""Property-based, as tests/test_fuzz_api.py does for /api/: whatever a client sends to /v1/,
the gateway never answers 5xx, every refusal is in OpenAI's error shape, and a refused request
changes nothing: no session, no audit record, no delivery lock, no key; of the rate counters,
only the caller's own count of this one request.

Requests are drawn from the served OpenAPI description's /v1/ paths, their bodies from the
JSON Schema that pydantic makes of the gateway's request models, mixing valid values with
hostile ones, with strange keys, schemes and content types, and unknown paths and methods.
Every application's generations are at their limit (``max_concurrent`` 0): a body the gateway
accepts is refused at the last step, after every check, so no worker is needed.

Personas: "drafter" is bound to clinical notes and owns the sessions; "other" owns one of its
own there; "revoked" lost its key; "limited" has no requests left this minute."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import AsyncClient
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.gateway import answers, limits
from reviewer.lifecycle import application_keys
from reviewer.models import Application
from reviewer.models import ReviewSession as S
from reviewer.web import openapi
from reviewer.web import tokenizer as web_tokenizer
from reviewer.web.health import redis_client
from tests.db_snapshot import snapshot
from tests.floor_factory import contracts
from tests.session_factory import clinical_notes, make_session, stub_worker
from tests.test_fuzz_api import FUZZ, HOSTILE, RAW_BODY_LIST, STRANGE_QUERY, encode, resolve

SPEC = openapi.description()
MODELS = ["caesura:clinical-notes", "caesura:contracts", "caesura:nothing", "gpt-4o", ""]
MESSAGE = {"role": "user", "content": "Fever since Monday."}


# --- bodies from the request models' JSON Schema --------------------------------------------


def drawn(schema: dict, name: str = ""):
    """Values the schema allows (near enough), each field by its name where that matters."""
    schema = resolve(schema, SPEC)
    if name == "model":
        return st.sampled_from(MODELS)
    if "anyOf" in schema:
        return st.one_of(*[drawn(s, name) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        low = schema.get("minimum", -(2**63))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 2**63) - 1)
        return st.one_of(st.integers(low, min(high, low + 45)), st.integers(low, high))
    if kind == "number":
        return st.floats(schema.get("minimum", 0.0), schema.get("maximum", 2.0))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "string":
        if name == "type":  # a content part's
            return st.sampled_from(["text", "input_text", "image_url", "input_audio", ""])
        high = max(schema.get("minLength", 0), min(30, schema.get("maxLength", 30)))
        return st.text(min_size=schema.get("minLength", 0), max_size=high)
    if kind == "array":
        items = st.lists(drawn(schema.get("items", {})), min_size=0, max_size=3)
        return st.one_of(st.just([MESSAGE]), items) if name == "messages" else items
    if kind == "object":
        return body_of(schema)
    return HOSTILE


def value_for(schema: dict, name: str):
    return st.one_of(drawn(schema, name), drawn(schema, name), drawn(schema, name), HOSTILE)


def body_of(schema: dict):
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fields = st.fixed_dictionaries(
        {n: value_for(p, n) for n, p in properties.items() if n in required},
        optional={n: value_for(p, n) for n, p in properties.items() if n not in required},
    )
    extra = st.dictionaries(st.text(max_size=12), HOSTILE, max_size=2)
    return st.one_of(fields, fields, st.builds(lambda f, e: {**e, **f}, fields, extra))


# --- requests --------------------------------------------------------------------------------

CALLERS = ["drafter"] * 6 + ["other", "revoked", "limited", "none", "odd"]
ODD_AUTHORIZATION = st.sampled_from(
    ["Bearer", "Bearer  ", "bearer cae_", "Basic YTpi", "Token cae_x", "Bearer " + "x" * 9000]
)
CONTENT_TYPES = st.sampled_from(
    ["application/json"] * 6
    + ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
TARGETS = ["paused", "completed", "theirs", "missing", "huge", "digits", "text"]
# The sessions that wait for their review: a stream of one, by its own application, waits up
# to the domain's max_wait_s (10 minutes), so no drawn request streams them.
LIVE = ("paused", "theirs")
UNKNOWN_PATHS = st.sampled_from(
    ["/v1/embeddings", "/v1/", "/v1/responses/resp_1/x", "/v1/models/caesura:clinical-notes"]
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    target: str
    text_id: str
    query: dict
    body: str | bytes | None
    content_type: str
    caller: str
    authorization: str


def operations() -> list[tuple[str, str, dict]]:
    return [
        (path, method, operation)
        for path, item in SPEC["paths"].items()
        if path.startswith("/v1/")
        for method, operation in item.items()
        if method in ("get", "post")
    ]


@st.composite
def requests(draw) -> Request:
    path, method, operation = draw(st.sampled_from(operations()))
    if draw(st.integers(0, 14)) == 0:
        path = draw(UNKNOWN_PATHS)
    if draw(st.integers(0, 9)) == 0:  # a method the endpoint does not take
        method = draw(st.sampled_from(["put", "patch", "delete", "get", "post"]))
    target = draw(st.sampled_from(TARGETS))
    query = {}
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "query" and draw(st.booleans()):
            value = draw(st.one_of(drawn(parameter["schema"]).map(str), STRANGE_QUERY))
            query[parameter["name"]] = value
    if target in LIVE and query.get("stream", "").lower() in ("true", "1"):
        del query["stream"]  # a live session's stream waits for its review: not here
    body = None
    if method in ("post", "put", "patch"):
        content = operation.get("requestBody", {}).get("content", {})
        schema = content.get(openapi.JSON, {}).get("schema", {"type": "object"})
        body = draw(st.one_of(body_of(resolve(schema, SPEC)).map(encode), RAW_GATEWAY_BODIES))
    return Request(
        method,
        path,
        target,
        draw(st.text(min_size=1, max_size=20)),
        query,
        body,
        draw(CONTENT_TYPES),
        draw(st.sampled_from(CALLERS)),
        draw(ODD_AUTHORIZATION),
    )


RAW_GATEWAY_BODIES = st.sampled_from(
    [*RAW_BODY_LIST, '{"model": "caesura:clinical-notes", "messages": "' + "y" * 2_000_000 + '"}']
)


# --- the world -------------------------------------------------------------------------------


class ByteTokenizer:
    """Stands in for the model's tokenizer (no model read in the fast loop): a token a byte."""

    chat_template = None

    def encode(self, text: str) -> list[int]:
        return list(text.encode())


@pytest.fixture
def world(monkeypatch):
    stub_worker(monkeypatch)
    monkeypatch.setattr(web_tokenizer, "tokenizer", ByteTokenizer)
    monkeypatch.setattr(web_tokenizer, "context_length", lambda: 2048)
    clinics = clinical_notes()
    contracts()
    made = {
        name: application_keys.create(name, [clinics], "root", max_concurrent=1)
        for name in ("drafter", "other", "revoked", "limited")
    }
    # At their limit: what passes every check is refused at the last one (no worker needed).
    Application.objects.update(max_concurrent=0, requests_per_minute=100_000)
    Application.objects.filter(name="limited").update(requests_per_minute=1)
    application_keys.revoke(made["revoked"][0], "root")
    keys = {name: key for name, (_, key) in made.items()}
    if stale := rate_keys():  # counted in earlier runs, for applications with the same ids
        redis_client().delete(*stale)
    limits.count_request(Application.objects.get(name="limited"))  # its minute is spent
    return {"keys": keys, "apps": {name: app for name, (app, _) in made.items()}}


def sessions_for(world: dict) -> dict[str, str]:
    drafter, other = world["apps"]["drafter"], world["apps"]["other"]
    paused = make_session(None, application=drafter)
    completed = make_session(None, S.COMPLETED, application=drafter, released_chars=4)
    theirs = make_session(None, application=other)
    return {
        "paused": answers.response_id(paused.pk),
        "completed": f"chatcmpl-{completed.pk}",
        "theirs": answers.response_id(theirs.pk),
        "missing": "resp_987654321",
        "huge": "resp_" + "9" * 30,
        "digits": "resp_\u00b2\u0663",
    }


def authorization(world: dict, call: Request) -> str | None:
    if call.caller == "none":
        return None
    if call.caller == "odd":
        return call.authorization
    return f"Bearer {world['keys'][call.caller]}"


def rate_keys() -> list[bytes]:
    return list(redis_client().keys(limits.rate_key(0, 0).rsplit(":", 2)[0] + ":*"))


def rate_counts() -> dict[int, int]:
    """Requests counted so far per application, over every minute's counter."""
    client = redis_client()
    counted: dict[int, int] = {}
    for key in rate_keys():
        app = int(key.decode().rsplit(":", 2)[1])
        counted[app] = counted.get(app, 0) + int(client.get(key) or 0)
    return counted


def state() -> dict:
    return {
        **snapshot(),
        "delivered": list(S.objects.order_by("pk").values_list("pk", "released_chars", "gateway")),
        "applications": list(
            Application.objects.order_by("pk").values_list("pk", "key_digest", "revoked_at")
        ),
    }


async def send(call: Request, url: str, auth: str | None) -> tuple[object, bytes]:
    headers = {"Authorization": auth} if auth is not None else {}
    client = AsyncClient(raise_request_exception=False)
    data = call.body.encode() if isinstance(call.body, str) else (call.body or b"")
    response = await client.generic(
        call.method.upper(), url, data, content_type=call.content_type, headers=headers
    )
    if response.streaming:
        return response, b"".join([chunk async for chunk in response.streaming_content])
    return response, response.content


def check_answer(response, content: bytes, call: Request) -> None:
    where = f"{call.method.upper()} {call.path} -> {response.status_code}"
    assert response.status_code < 500, f"{where}: {content[:300]!r}"
    kind = response["Content-Type"].split(";")[0]
    if response.status_code < 300:
        assert kind in (openapi.JSON, "text/event-stream"), where
        return
    assert kind == openapi.JSON, where
    body = json.loads(content)
    assert list(body) == ["error"], where
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, where
    assert isinstance(error["message"], str) and error["message"], where
    assert isinstance(error["type"], str) and error["type"], where
    if response.status_code == 429:
        assert int(response["Retry-After"]) >= 1, where


@pytest.mark.slow  # hundreds of generated requests
@pytest.mark.django_db
@FUZZ
@given(call=requests())
def test_it_never_answers_5xx_and_a_refused_request_changes_nothing(world, call):
    with transaction.atomic():
        ids = sessions_for(world)
        ids["text"] = quote(call.text_id, safe="")
        url = call.path.replace("{response_id}", ids[call.target])
        if call.query:
            url += "?" + urlencode(call.query)
        before, counted = state(), rate_counts()
        response, content = async_to_sync(send)(call, url, authorization(world, call))
        check_answer(response, content, call)
        if 400 <= response.status_code < 500:
            assert state() == before, f"{call.method} {url[:200]} changed the database"
            after, caller = rate_counts(), world["apps"].get(call.caller)
            # (a counter of an earlier minute may expire meanwhile: counts only grow here)
            grown = {a: n - counted.get(a, 0) for a, n in after.items() if n > counted.get(a, 0)}
            assert grown in ({}, {getattr(caller, "pk", None): 1}), grown
        transaction.set_rollback(True)


@st.composite
def background_bodies(draw) -> str:
    """A background response, mostly valid: what the gateway accepts starts a session."""
    schema = SPEC["components"]["schemas"]["ResponseRequest"]
    if not draw(st.integers(0, 3)):
        body = draw(body_of(schema))  # a call that waits for its review would wait here
        return encode({**body, "background": True, "stream": False})
    fixed = ("model", "input", "background", "stream")
    optional = {n: drawn(p, n) for n, p in schema["properties"].items() if n not in fixed}
    body = {
        "model": "caesura:clinical-notes",
        "background": True,
        "input": draw(st.one_of(st.text(min_size=1, max_size=30), st.just([MESSAGE]))),
        **draw(st.fixed_dictionaries({}, optional=optional)),
    }
    return encode(body)


@pytest.mark.slow  # generated requests that start generations
@pytest.mark.django_db
@settings(FUZZ, max_examples=60)
@given(body=background_bodies())
def test_it_stores_whatever_it_accepts_and_nothing_it_refuses(world, body):
    """With room for generations: an accepted body becomes a session (no worker: it waits),
    a refused one changes nothing; never a 5xx, whatever strings the body holds."""
    call = Request("post", "/v1/responses", "", "", {}, body, openapi.JSON, "drafter", "")
    with transaction.atomic():
        Application.objects.filter(name="drafter").update(max_concurrent=1000)
        before = state()
        response, content = async_to_sync(send)(call, call.path, authorization(world, call))
        check_answer(response, content, call)
        if response.status_code == 200:
            created = S.objects.get(pk=answers.session_id_from(json.loads(content)["id"]))
            assert created.application.name == "drafter" and created.status == S.RUNNING
        else:
            assert state() == before, f"a refused body changed the database: {body[:200]}"
        transaction.set_rollback(True)
