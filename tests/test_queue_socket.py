"""The queue socket: a reviewer hears of every change to the gateway generations of the domains
they review, through the real ASGI application and the Redis channel layer; a reviewer of
another domain hears nothing; an owned session is told to its owner's pages alone."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections, transaction
from django.test import Client

from reviewer import lifecycle
from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession
from reviewer.web import queue_consumer
from reviewer.web.consumers import UNAUTHENTICATED
from tests.floor_factory import gateway_session, make_floor
from tests.session_factory import make_session
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
S = ReviewSession


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="carol-password-1")


@pytest.fixture(autouse=True)
async def close_thread_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def queue_socket(user=None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost")]
    if user is not None:
        headers.append((b"cookie", await session_cookie(user)))
    communicator = WebsocketCommunicator(application, "/ws/queue/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@database_sync_to_async
def pause(session: ReviewSession) -> None:
    """What the worker's pause report does to the status, in its own transaction."""
    with transaction.atomic():
        transitions.set_status(session, S.PAUSED)


async def test_it_tells_the_domains_reviewers_of_a_new_pause_and_nobody_else(alice, bob, carol):
    await database_sync_to_async(make_floor)(alice, bob, carol)
    session = await database_sync_to_async(gateway_session)(S.RUNNING)
    sockets = {user.username: await queue_socket(user) for user in (alice, bob, carol)}
    await pause(session)
    for name in ("alice", "bob"):
        message = await sockets[name].receive_json_from(timeout=3)
        assert message == {
            "type": "queue",
            "session": session.pk,
            "domain": session.domain_id,
            "owner": None,
            "status": "paused",
            "claimed_by": None,
            "action": "status",
        }
    assert await sockets["carol"].receive_nothing(timeout=0.5)
    await database_sync_to_async(lifecycle.claim)(alice, session.pk)
    claimed = await sockets["bob"].receive_json_from(timeout=3)
    assert claimed["action"] == "claim" and claimed["claimed_by"] == "alice"
    assert await sockets["carol"].receive_nothing(timeout=0.5)
    for communicator in sockets.values():
        await communicator.disconnect()


async def test_it_tells_a_reviewers_own_session_to_them_alone(alice, bob, carol):
    await database_sync_to_async(make_floor)(alice, bob, carol)
    own = await database_sync_to_async(make_session)(alice, S.RUNNING)
    theirs, others = await queue_socket(alice), await queue_socket(bob)
    await pause(own)
    message = await theirs.receive_json_from(timeout=3)
    assert (message["session"], message["owner"], message["status"]) == (own.pk, alice.pk, "paused")
    assert await others.receive_nothing(timeout=0.5)
    for communicator in (theirs, others):
        await communicator.disconnect()


async def test_it_closes_for_an_anonymous_visitor_and_refuses_messages(alice):
    anonymous = WebsocketCommunicator(
        application, "/ws/queue/", headers=[(b"origin", b"http://localhost")]
    )
    await anonymous.connect()
    assert (await anonymous.receive_output(timeout=3))["code"] == 4401
    communicator = await queue_socket(alice)
    await communicator.send_to(text_data='{"command": "claim"}')
    reply = await communicator.receive_json_from(timeout=3)
    assert reply["type"] == "error" and reply["status"] == 400
    await communicator.disconnect()


@database_sync_to_async
def deactivate(user) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)


@database_sync_to_async
def leave_domains(user) -> None:
    user.review_domains.clear()


async def test_it_closes_a_socket_whose_login_is_over_before_telling_it_more(
    alice, bob, carol, monkeypatch
):
    monkeypatch.setattr(queue_consumer, "USER_CHECK_S", 0.0)  # every message reads the user
    await database_sync_to_async(make_floor)(alice, bob, carol)
    session = await database_sync_to_async(gateway_session)(S.RUNNING)
    communicator = await queue_socket(alice)
    await deactivate(alice)
    await pause(session)
    output = await communicator.receive_output(timeout=3)
    assert output["type"] == "websocket.close" and output["code"] == UNAUTHENTICATED


async def test_a_reviewer_who_left_a_domain_hears_no_more_of_it(alice, bob, carol, monkeypatch):
    monkeypatch.setattr(queue_consumer, "USER_CHECK_S", 0.0)
    await database_sync_to_async(make_floor)(alice, bob, carol)
    session = await database_sync_to_async(gateway_session)(S.RUNNING)
    sockets = {user.username: await queue_socket(user) for user in (alice, bob)}
    await leave_domains(alice)
    await pause(session)
    assert (await sockets["bob"].receive_json_from(timeout=3))["status"] == "paused"
    assert await sockets["alice"].receive_nothing(timeout=0.5)  # open, and told nothing
    for communicator in sockets.values():
        await communicator.disconnect()
