"""Property-based: whatever a client sends, the API never answers 5xx, answers JSON under
/api/, and a refused request (4xx) changes nothing in the database.

Requests are generated from the served OpenAPI description (every path, method, parameter
and body field it lists), mixing valid values with hostile ones: wrong types, extreme and
non-finite numbers (written into the JSON text verbatim), huge and unstorable strings,
nulls, extra keys, and bodies that are not JSON objects at all. The websocket gets the
commands of the commands table the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections, transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer.models import ReviewSession as S
from reviewer.web import arguments, openapi
from reviewer.web.auth import issue_token
from reviewer.web.command_table import COMMANDS
from tests.db_snapshot import snapshot
from tests.session_factory import clinical_notes, make_session, stub_worker
from webapp.asgi import application

FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
SOCKET_FUZZ = settings(FUZZ, max_examples=80)


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is: numbers and escapes that Python's encoder never writes."""

    text: str


def encode(value) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


# --- values ----------------------------------------------------------------------------------

HOSTILE = st.one_of(
    st.sampled_from(
        [
            Raw("1e400"),
            Raw("-1e400"),
            Raw("NaN"),
            Raw("Infinity"),
            Raw("-Infinity"),
            Raw("1e308"),
            Raw("-0.0"),
            Raw("1" + "0" * 400),
            Raw('"\\ud800"'),
            Raw('"x\\udfff"'),
            Raw('"\\u0000"'),
            Raw('"a\\u0000b"'),
            None,
            True,
            False,
            2**31,
            2**63,
            -(2**63) - 1,
            10**40,
            -1,
            0,
            2.5,
            3.0,
            -0.5,
            "",
            " ",
            "3",
            "1e400",
            "x" * 100_001,
            "é" * 60_000,
            "\U0001f9ea" * 5_000,
            "<script>alert(1)</script>",
            [],
            {},
            [1],
            {"a": 1},
            [[[[[]]]]],
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=3),
)


def resolve(schema: dict, spec: dict) -> dict:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def valid(schema: dict, spec: dict, name: str = ""):
    """Values the schema allows, biased towards the small numbers that hit real ranges."""
    schema = resolve(schema, spec)
    if "anyOf" in schema:  # an optional field: its own schema, or null
        return st.one_of([valid(branch, spec, name) for branch in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "integer":
        low, high = schema.get("minimum", -(2**63)), schema.get("maximum", 2**63 - 1)
        return st.one_of(st.integers(low, min(high, low + 45)), st.integers(low, high))
    if kind == "number":
        return st.floats(schema.get("minimum", 0.0), schema.get("maximum", 2.0))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        if name == "domain":
            return st.sampled_from(["Clinical notes", "clinical-notes", "Astrology"])
        return st.text(min_size=schema.get("minLength", 0), max_size=min(30, schema["maxLength"]))
    if kind == "object":
        return body_of(schema, spec)
    return HOSTILE


def value_for(schema: dict, spec: dict, name: str = ""):
    return st.one_of(valid(schema, spec, name), valid(schema, spec, name), HOSTILE)


def body_of(schema: dict, spec: dict):
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fields = st.fixed_dictionaries(
        {n: value_for(p, spec, n) for n, p in properties.items() if n in required},
        optional={n: value_for(p, spec, n) for n, p in properties.items() if n not in required},
    )
    extra = st.dictionaries(st.text(max_size=12), HOSTILE, max_size=2)
    return st.one_of(
        fields,
        st.builds(lambda f, e: {**e, **f}, fields, extra),
        st.fixed_dictionaries(
            {}, optional={n: value_for(p, spec, n) for n, p in properties.items()}
        ),
    )


RAW_BODY_LIST = [
    "",
    "{",
    "{oops",
    "null",
    "[]",
    '"a string"',
    "7",
    "NaN",
    '{"a": NaN}',
    '{"position": 1e400, "start": Infinity}',
    "[" * 50_000,
    '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"a": "\\ud800"}',
    b"\xff\xfe{}",  # not UTF-8
    '{"input": "' + "y" * 2_000_000 + '"}',  # under the upload limit, over any field's
]
RAW_BODIES = st.sampled_from(RAW_BODY_LIST)

SOCKET_RAW = st.sampled_from([b for b in RAW_BODY_LIST if b and isinstance(b, str)])


# --- requests --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    target: str
    query: dict
    body: str | bytes | None
    caller: str


TARGETS = ["paused", "running", "generated", "completed", "bobs", "missing", "huge"]
CALLERS = ["token"] * 6 + ["bob-token", "none", "bad-token", "cookie-without-csrf"]
STRANGE_QUERY = st.sampled_from(
    ["1e400", "-1", "NaN", "", "\u0663", "9" * 5000, "\x00", "2.5", "1" * 30, "true"]
)


def operations(spec: dict) -> list[tuple[str, str, dict]]:
    return [
        (path, method, operation)
        for path, item in spec["paths"].items()
        if path.startswith("/api/")  # the gateway's /v1/ paths: tests/test_fuzz_gateway.py
        for method, operation in item.items()
        if method in ("get", "post")
    ]


@st.composite
def requests(draw, spec: dict):
    path, method, operation = draw(st.sampled_from(operations(spec)))
    if draw(st.integers(0, 9)) == 0:  # a method the endpoint does not take
        method = draw(st.sampled_from(["put", "patch", "delete", "get", "post"]))
    query = {}
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "query" and draw(st.booleans()):
            schema = parameter["schema"]
            query[parameter["name"]] = draw(st.one_of(valid(schema, spec).map(str), STRANGE_QUERY))
    body = None
    if method in ("post", "put", "patch"):
        content = operation.get("requestBody", {}).get("content", {})
        schema = content.get(openapi.JSON, {}).get("schema", {"type": "object"})
        body = draw(st.one_of(body_of(resolve(schema, spec), spec).map(encode), RAW_BODIES))
    return Request(
        method, path, draw(st.sampled_from(TARGETS)), query, body, draw(st.sampled_from(CALLERS))
    )


SPEC = openapi.description()  # the schema's limits read settings: same values in tests


@pytest.fixture
def world(alice, bob, monkeypatch):
    """Users, tokens and a glossary term; each example adds its sessions in a savepoint."""
    stub_worker(monkeypatch)
    clinical_notes().glossaries.create(name="Terms").terms.create(term="fever", preferred="pyrexia")
    return {
        "alice": alice,
        "bob": bob,
        "alice_key": issue_token(alice),
        "bob_key": issue_token(bob),
    }


def sessions_for(world: dict) -> dict[str, int]:
    alice = world["alice"]
    return {
        "paused": make_session(alice).pk,
        "running": make_session(alice, status=S.RUNNING).pk,
        "generated": make_session(alice, status=S.GENERATED).pk,
        "completed": make_session(alice, status=S.COMPLETED).pk,
        "bobs": make_session(world["bob"]).pk,
        "missing": 987_654_321,
        "huge": 10**30,
    }


def client_for(world: dict, caller: str) -> Client:
    if caller == "token":
        return Client(headers={"Authorization": f"Token {world['alice_key']}"})
    if caller == "bob-token":
        return Client(headers={"Authorization": f"Token {world['bob_key']}"})
    if caller == "bad-token":
        return Client(headers={"Authorization": "Token \x7f\x00 nope"})
    client = Client(enforce_csrf_checks=True)
    if caller == "cookie-without-csrf":
        client.force_login(world["alice"])
    return client


def send(client: Client, request: Request, session_id: int):
    url = request.path.replace("{session_id}", str(session_id))
    if request.query:
        url += "?" + urlencode(request.query)
    call = getattr(client, request.method)
    if request.body is None:
        return call(url)
    data = request.body if isinstance(request.body, bytes) else request.body.encode()
    return call(url, data, content_type=openapi.JSON)


def check_answer(response, request: Request) -> None:
    where = f"{request.method.upper()} {request.path} -> {response.status_code}"
    assert response.status_code < 500, where
    content_type = response["Content-Type"].split(";")[0]
    if response.status_code < 300 and content_type in documented_types(request):
        return  # a document the API describes (a redline as HTML or DOCX)
    assert content_type == "application/json", where
    json.loads(response.content)  # JSON, not an HTML error page


def documented_types(request: Request) -> set[str]:
    """The content types the API description gives for the operation's success answers."""
    operation = SPEC["paths"].get(request.path, {}).get(request.method, {})
    answers = operation.get("responses", {})
    return {kind for code, a in answers.items() if code < "300" for kind in a.get("content", {})}


@pytest.mark.slow  # hundreds of generated requests
@pytest.mark.django_db
@FUZZ
@given(call=requests(SPEC))
def test_it_never_answers_5xx_and_a_refused_request_changes_nothing(world, call):
    with transaction.atomic():
        ids = sessions_for(world)
        before = snapshot()
        response = send(client_for(world, call.caller), call, ids[call.target])
        check_answer(response, call)
        if 400 <= response.status_code < 500:
            assert snapshot() == before, f"{call.method} {call.path} changed the database"
        transaction.set_rollback(True)


@pytest.mark.django_db
def test_it_answers_a_body_over_the_upload_limit_with_json(world):
    from django.conf import settings as django_settings

    session = make_session(world["alice"])
    client = client_for(world, "token")
    huge = '{"text": "' + "x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + '"}'
    before = snapshot()
    for url in ("/api/sessions", f"/api/sessions/{session.pk}/edit"):
        response = client.post(url, huge, content_type=openapi.JSON)
        assert response.status_code < 500
        assert response["Content-Type"].startswith("application/json")
        assert "error" in json.loads(response.content)
    assert snapshot() == before


# --- the websocket ---------------------------------------------------------------------------


COMMAND_BODIES = {
    name: SPEC["components"]["schemas"][command.body.__name__] for name, command in COMMANDS.items()
}
COMMAND_BODIES["sync"] = {
    "type": "object",
    "properties": {"after": arguments.AFTER.schema()},
    "required": ["after"],
}


@st.composite
def socket_messages(draw) -> str:
    if draw(st.integers(0, 7)) == 0:
        return draw(SOCKET_RAW)
    name = draw(st.sampled_from(list(COMMAND_BODIES)))
    message = draw(body_of(COMMAND_BODIES[name], SPEC))
    message["command"] = draw(st.one_of(st.just(name), st.just(name), HOSTILE))
    return encode(message)


async def exchange(session_id: int, cookie: bytes, text: str) -> list[dict]:
    """Send one message, then a probe; every frame up to the probe's answer."""
    headers = [(b"origin", b"http://localhost"), (b"cookie", cookie)]
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers)
    connected, _ = await communicator.connect()
    assert connected
    try:
        await communicator.send_to(text_data=text)
        await communicator.send_json_to({"command": "probe", "command_id": "probe"})
        frames = []
        while True:
            output = await communicator.receive_output(timeout=10)
            assert output["type"] == "websocket.send", f"the socket closed: {output}"
            frame = json.loads(output["text"])
            if frame.get("command_id") == "probe" and frame.get("type") == "error":
                return frames
            frames.append(frame)
    finally:
        await communicator.disconnect()


@pytest.mark.slow  # dozens of generated websocket conversations
@pytest.mark.django_db(transaction=True)
@SOCKET_FUZZ
@given(text=socket_messages(), status=st.sampled_from([S.PAUSED, S.RUNNING, S.GENERATED]))
def test_it_answers_every_socket_message_without_closing_or_5xx(alice, monkeypatch, text, status):
    stub_worker(monkeypatch)
    clinical_notes()
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    session = make_session(alice, status=status)
    # This session alone: the sessions of earlier examples stay in the database (transaction
    # tests), where the suite's background processes may still touch them.
    before = snapshot(session.pk)
    try:
        frames = async_to_sync(exchange)(session.pk, cookie, text)
    finally:
        async_to_sync(database_sync_to_async(connections.close_all))()
    replies = [f for f in frames if "command" in f]  # acks and errors; events have none
    assert all(f.get("status", 200) < 500 for f in replies), replies
    assert len(replies) <= 1, replies
    if replies and replies[0]["type"] == "error":
        assert snapshot(session.pk) == before, f"a refused message changed it: {text[:200]}"
