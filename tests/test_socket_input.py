"""Malformed websocket messages: each gets an error frame, the socket stays open, nothing changes."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from reviewer.models import ReviewSession
from tests.db_snapshot import snapshot
from tests.session_factory import make_session

# The same socket set-up as the consumer tests: a stand-in worker, closed thread connections.
from tests.test_consumer import close_thread_connections, dispatched, session_cookie  # noqa: F401
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
S = ReviewSession


async def open_socket(session_id: int, user) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"cookie", await session_cookie(user))]
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def next_reply(communicator: WebsocketCommunicator) -> dict:
    """The next ack or error frame, skipping events; fails if the socket closes instead."""
    while True:
        output = await communicator.receive_output(timeout=5)
        assert output["type"] == "websocket.send", f"the socket closed: {output}"
        message = json.loads(output["text"])
        if message.get("type") in ("ack", "error"):
            return message


async def still_open(communicator: WebsocketCommunicator) -> None:
    """A well-formed probe still gets its answer on the same socket."""
    await communicator.send_json_to({"command": "pause", "command_id": "probe"})
    reply = await next_reply(communicator)
    assert (reply["command_id"], reply["status"]) == ("probe", 409)  # paused: cannot pause


MALFORMED_TEXT = [
    '{"command": ["pause"]}',
    '{"command": {"name": "pause"}}',
    '{"command": null}',
    '{"command": 7}',
    '{"command": "sync", "after": 1e400}',
    '{"command": "sync", "after": -1e400}',
    '{"command": "sync", "after": NaN}',
    '{"command": "sync", "after": Infinity}',
    '{"command": "sync", "after": -1}',
    '{"command": "sync", "after": 2.5}',
    '{"command": "sync", "after": "3"}',
    '{"command": "sync", "after": [1]}',
    '{"command": "sync", "after": 100000000000000000000000000000}',
    '{"command": "rollback", "position": 1e400}',
    '{"command": "rollback", "position": 2.5}',
    '{"command": "choose", "token_id": Infinity}',
    '{"command": "attention", "layer": true}',
    '{"command": "edit", "start": 0, "end": 3, "text": "\\ud800"}',
    '{"command": "edit", "start": 0, "end": 3, "text": ["x"]}',
    '{"command": "edit", "start": 0, "end": 3, "text": "x", "glossary_term": 1e400}',
    '{"command": "reject", "comment": "\\u0000"}',
    '{"command": "resume", "command_id": ["r"]}',
    '{"command": "resume", "command_id": "\\udc00"}',
    '{"command": "resume", "command_id": "' + "r" * 101 + '"}',
    '["pause"]',
    '"pause"',
    "null",
    "{oops",
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
]


@pytest.mark.parametrize("text", MALFORMED_TEXT, ids=lambda t: t[:40])
async def test_it_answers_a_malformed_message_with_an_error_frame_and_stays_open(alice, text):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await open_socket(session.pk, alice)
    before = await database_sync_to_async(snapshot)()
    await communicator.send_to(text_data=text)
    reply = await next_reply(communicator)
    assert (reply["type"], reply["status"]) == ("error", 400), reply
    assert await database_sync_to_async(snapshot)() == before
    await still_open(communicator)
    await communicator.disconnect()


async def test_it_answers_a_binary_frame_with_an_error_frame(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await open_socket(session.pk, alice)
    await communicator.send_to(bytes_data=b'{"command": "pause"}')
    reply = await next_reply(communicator)
    assert (reply["type"], reply["status"]) == ("error", 400)
    assert "binary" in reply["message"]
    await still_open(communicator)
    await communicator.disconnect()


async def test_it_names_the_refused_argument_in_the_error_frame(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await open_socket(session.pk, alice)
    await communicator.send_json_to({"command": "rollback", "position": 2.5, "command_id": "rb"})
    reply = await next_reply(communicator)
    assert (reply["command"], reply["command_id"], reply["status"]) == ("rollback", "rb", 400)
    assert "position must be a JSON integer" in reply["message"]
    await communicator.disconnect()


async def test_it_still_syncs_with_a_valid_after(alice):
    session = await database_sync_to_async(make_session)(alice)
    communicator = await open_socket(session.pk, alice)
    await communicator.send_json_to({"command": "sync", "after": 0})
    assert await communicator.receive_nothing()  # no events yet, and no error
    await still_open(communicator)
    await communicator.disconnect()
