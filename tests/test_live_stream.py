"""The live stream through the real ASGI application, Redis channel layer and worker."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from reviewer import lifecycle
from reviewer.models import ReviewSession
from tests.test_workflow import PROMPT
from webapp.asgi import application

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
async def close_thread_connections():
    """The consumer's database thread keeps a connection open; close it so teardown can drop the db."""
    yield
    await database_sync_to_async(connections.close_all)()


def headers_for(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    return [(b"cookie", cookie.encode()), (b"origin", b"http://localhost")]


async def receive_until(communicator, event_type: str, seen: list, timeout: float = 60) -> dict:
    async def loop():
        while True:
            message = await communicator.receive_json_from(timeout=timeout)
            seen.append(message)
            if message.get("type") == event_type:
                return message

    return await asyncio.wait_for(loop(), timeout)


async def test_it_streams_tokens_in_order_and_pauses_on_a_websocket_command(
    celery_worker_process,
    alice,
    plain_domain,
):
    started = await sync_to_async(lifecycle.start_session)(
        alice, "Plain", PROMPT, seed=4, max_new_tokens=40
    )
    headers = await sync_to_async(headers_for)(alice)
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{started['id']}/", headers=headers
    )
    connected, _ = await communicator.connect()
    assert connected
    seen: list[dict] = []
    try:
        while sum(1 for m in seen if m.get("type") == "token") < 3:
            await receive_until(communicator, "token", seen)
        await communicator.send_json_to({"command": "pause", "command_id": "p-1"})
        paused = await receive_until(communicator, "pause", seen)
        attention = await receive_until(communicator, "pause_attention", seen)
    finally:
        await communicator.disconnect()

    events = [m for m in seen if "seq" in m]
    assert [m["seq"] for m in events] == list(
        range(events[0]["seq"], events[0]["seq"] + len(events))
    )
    tokens = [m for m in events if m["type"] == "token"]
    assert [t["position"] for t in tokens] == list(range(len(tokens)))
    assert all({"token_id", "text", "probability", "entropy"} <= set(t) for t in tokens)
    assert paused["trigger"] == "manual" and paused["alternatives"]
    # The attention is read from the frozen state after the pause is sent, and names it.
    assert attention["pause_id"] == paused["pause_id"] and attention["attention"]["layers"]
    assert attention["seq"] > paused["seq"] and attention["position"] == paused["position"]
    acks = [m for m in seen if m.get("type") == "ack"]
    assert acks and acks[0]["command_id"] == "p-1"
    session = await sync_to_async(ReviewSession.objects.get)(pk=started["id"])
    assert session.status == "paused" and len(session.generated_ids) == paused["position"]


async def test_it_replays_missed_events_to_a_client_that_reconnects(
    celery_worker_process, alice, plain_domain
):
    started = await sync_to_async(lifecycle.start_session)(
        alice, "Plain", PROMPT, seed=4, max_new_tokens=6
    )
    for _ in range(600):
        status = await sync_to_async(lambda: ReviewSession.objects.get(pk=started["id"]).status)()
        if status == "generated":
            break
        await asyncio.sleep(0.1)
    headers = await sync_to_async(headers_for)(alice)
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{started['id']}/?after=2", headers=headers
    )
    await communicator.connect()
    seen: list[dict] = []
    try:
        await receive_until(communicator, "finish", seen, timeout=10)
    finally:
        await communicator.disconnect()
    assert [m["seq"] for m in seen] == list(range(3, 3 + len(seen)))
    stored = await sync_to_async(
        lambda: list(ReviewSession.objects.get(pk=started["id"]).events.filter(seq__gt=2))
    )()
    assert [m["seq"] for m in seen] == [e.seq for e in stored]
    tokens = [m["position"] for m in seen if m["type"] == "token"]
    assert tokens == list(range(6 - len(tokens), 6))
