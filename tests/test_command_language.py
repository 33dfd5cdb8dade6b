"""A refused command says why in the reviewer's language: the session page's socket in the
page's (its language cookie, else Accept-Language), the API and the forms in the request's.
Without either, English, word for word as before."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import pytest
from django.test import Client
from django.utils import translation

from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession
from tests.session_factory import make_session
from tests.test_consumer import close_thread_connections, dispatched, session_cookie  # noqa: F401
from tests.test_socket_input import next_reply
from webapp.asgi import application

S = ReviewSession
REPO = Path(__file__).resolve().parent.parent
PAUSED_ZH = "会话状态为“已暂停”，无法暂停"
PAUSED_EN = "Cannot pause a session that is paused"


@contextlib.asynccontextmanager
async def page_socket(session_id: int, user, extra: list[tuple[bytes, bytes]]):
    """The session page's socket, logged in as ``user``, with these extra headers."""
    from channels.testing import WebsocketCommunicator

    cookie = await session_cookie(user)
    headers = [(b"origin", b"http://localhost")]
    cookies = [cookie] + [value for name, value in extra if name == b"cookie"]
    headers.append((b"cookie", b"; ".join(cookies)))
    headers += [(name, value) for name, value in extra if name != b"cookie"]
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers)
    connected, _ = await communicator.connect()
    assert connected
    try:
        yield communicator
    finally:
        await communicator.disconnect()


async def refusal_on_socket(session_id: int, user, extra: list[tuple[bytes, bytes]]) -> dict:
    async with page_socket(session_id, user, extra) as communicator:
        await communicator.send_json_to({"command": "pause", "command_id": "p1"})
        return await next_reply(communicator)


async def status_now(session_id: int) -> str:
    from channels.db import database_sync_to_async

    return await database_sync_to_async(lambda: S.objects.get(pk=session_id).status)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([(b"cookie", b"django_language=zh-hans")], PAUSED_ZH),
        ([(b"accept-language", b"zh-CN,zh;q=0.9")], PAUSED_ZH),
        ([(b"cookie", b"django_language=en"), (b"accept-language", b"zh-CN")], PAUSED_EN),
        ([], PAUSED_EN),
    ],
)
async def test_it_refuses_a_socket_command_in_the_pages_language(alice, extra, expected):
    from channels.db import database_sync_to_async

    session = await database_sync_to_async(make_session)(alice)
    reply = await refusal_on_socket(session.pk, alice, extra)
    assert (reply["type"], reply["status"], reply["command_id"]) == ("error", 409, "p1")
    assert reply["message"] == expected
    assert await status_now(session.pk) == S.PAUSED  # refused: nothing changed


@pytest.fixture
def client(alice) -> Client:
    """Alice's browser, logged in."""
    browser = Client()
    browser.force_login(alice)
    return browser


@pytest.mark.django_db
def test_it_refuses_an_api_command_in_the_requests_language(alice, client):
    session = make_session(alice, status=S.COMPLETED)
    url = f"/api/sessions/{session.pk}/resume"
    chinese = client.post(url, {}, content_type="application/json", HTTP_ACCEPT_LANGUAGE="zh-CN")
    english = client.post(url, {}, content_type="application/json")
    assert chinese.status_code == english.status_code == 409
    assert chinese.json()["error"] == "会话状态为“已批准”，无法继续生成"
    assert english.json()["error"] == "Cannot resume a session that is completed"


@pytest.mark.django_db
def test_it_says_a_reviewers_generating_limit_in_the_requests_language(alice, client, settings):
    from tests.session_factory import clinical_notes

    settings.CAESURA_REVIEWER_MAX_GENERATING = 1
    make_session(alice, status=S.RUNNING)
    body = {"domain": clinical_notes().name, "input": "Fever."}
    refused = client.post(
        "/api/sessions", body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="zh-CN"
    )
    assert refused.status_code == 429
    assert refused.json()["error"].startswith("你有 1 个会话正在生成，最多可同时生成 1 个")
    assert S.objects.filter(owner=alice).count() == 1


@pytest.mark.django_db
def test_it_says_why_the_new_session_form_was_refused_in_the_pages_language(
    alice, client, settings
):
    from tests.session_factory import clinical_notes

    settings.CAESURA_REVIEWER_MAX_GENERATING = 1
    make_session(alice, status=S.RUNNING)
    domain = clinical_notes()
    client.cookies["django_language"] = "zh-hans"
    form = {"domain": domain.pk, "input_text": "Fever.", "max_new_tokens": 12}
    page = client.post("/sessions/new", form)
    assert page.status_code == 200  # the form again, with the reason
    assert "个会话正在生成，最多可同时生成 1 个" in page.content.decode()
    assert S.objects.filter(owner=alice).count() == 1


COMMAND_TAKERS = {
    "command_on": 3,
    "require": 2,
    "require_claim": 2,
    "require_undelivered": 2,
    "_locked_gateway_session": 2,
}


def test_it_names_every_refused_command_in_the_catalogs_phrases():
    """Each command a refusal may name is one the catalog translates (COMMAND_PHRASES)."""
    with translation.override("en"):  # a request before may have left another active
        phrases = {str(p) for p in transitions.COMMAND_PHRASES}
    named = set()
    for module in (REPO / "reviewer" / "lifecycle").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                at = COMMAND_TAKERS.get(name)
                if at is not None and len(node.args) > at:
                    given = node.args[at]
                    if isinstance(given, ast.Constant):
                        named.add(given.value)
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "command" for t in node.targets
            ):
                for value in ast.walk(node.value):
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        named.add(value.value)
    assert {"pause", "roll back", "choose an alternative for", "claim"} <= named  # the scan works
    assert named <= phrases, sorted(named - phrases)


async def replies_on_socket(session_id: int, user, language: str, frames: list[str]) -> list[dict]:
    """The error frame each raw frame gets, then a binary one's, on a page in ``language``."""
    cookie = [(b"cookie", f"django_language={language}".encode())]
    async with page_socket(session_id, user, cookie) as communicator:
        replies = []
        for frame in frames:
            await communicator.send_to(text_data=frame)
            replies.append(await next_reply(communicator))
        await communicator.send_to(bytes_data=b"\x00")
        replies.append(await next_reply(communicator))
        return replies


MALFORMED = ["{not json", "[1]", '{"command": "fly"}', '{"command": "rollback", "position": 2.5}']


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("language", "expected"),
    [
        (
            "zh-hans",
            [
                "消息不是有效的 JSON",
                "消息必须是 JSON 对象",
                "未知命令 'fly'；已知命令：",
                "position 必须是 0 到 2147483647 之间的 JSON 整数，而不是 2.5",
                "消息必须是 JSON 文本，而不是二进制数据",
            ],
        ),
        (
            "en",
            [
                "Message is not valid JSON",
                "Messages must be JSON objects",
                "Unknown command 'fly'; known: ",
                "position must be a JSON integer from 0 to 2147483647, not 2.5",
                "Messages must be JSON text, not binary",
            ],
        ),
    ],
)
async def test_it_refuses_a_malformed_socket_message_in_the_pages_language(
    alice, language, expected
):
    from channels.db import database_sync_to_async

    session = await database_sync_to_async(make_session)(alice, status=S.PAUSED)
    replies = await replies_on_socket(session.pk, alice, language, MALFORMED)
    assert [r["status"] for r in replies] == [400] * 5
    for reply, start in zip(replies, expected, strict=True):
        assert reply["message"].startswith(start), (reply["message"], start)
    assert await status_now(session.pk) == S.PAUSED  # refused: nothing changed


@pytest.mark.django_db
def test_it_refuses_a_malformed_api_body_in_the_requests_language(alice, client):
    session = make_session(alice, status=S.PAUSED)
    url = f"/api/sessions/{session.pk}/rollback"

    def refusal(body: str, **language: str) -> str:
        answer = client.post(url, body, content_type="application/json", **language)
        assert answer.status_code == 400
        return answer.json()["error"]

    zh = {"HTTP_ACCEPT_LANGUAGE": "zh-CN"}
    assert refusal("[", **zh) == "请求体不是有效的 JSON"
    assert refusal("[]", **zh) == "请求体必须是 JSON 对象"
    assert refusal("{}", **zh) == "position 为必填项"
    assert refusal('{"position": "2"}', **zh).startswith("position 必须是 0 到")
    assert refusal("[") == "Request body is not valid JSON"
    assert refusal("{}") == "position is required"
    assert S.objects.get(pk=session.pk).status == S.PAUSED
