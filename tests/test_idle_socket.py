"""A session page's socket left idle: a real daphne, the Redis channel layer and a real
websocket client, as a reviewer's browser holds it while a session is paused."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from reviewer import events
from tests.conftest import REPO
from tests.session_factory import make_session

IDLE_S = 65  # the channel layer's blocking pop times out every 5 s: a dozen of them
SERVER_LOG = REPO / "var" / "test-daphne.log"


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def log_since(offset: int) -> str:
    with SERVER_LOG.open() as log:
        log.seek(offset)
        return log.read()


def test_it_knows_how_long_the_channel_layer_blocks():
    assert RedisChannelLayer.brpop_timeout == settings.CHANNEL_LAYER_BLOCKING_POP_S
    assert RedisChannelLayer.brpop_timeout < settings.CHANNEL_LAYER_SOCKET_TIMEOUT_S


async def test_it_waits_on_a_quiet_channel_past_the_blocking_pop():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    # Our own deadline must be what ends the wait, not a Redis read timeout.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), RedisChannelLayer.brpop_timeout * 2 + 1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_keeps_an_idle_socket_on_a_paused_session_open_and_still_delivers(server_url, alice):
    session = make_session(alice)
    offset = SERVER_LOG.stat().st_size
    url = server_url.replace("http://", "ws://") + f"/ws/sessions/{session.pk}/"
    # No client pings: a browser does not send any, so only the server keeps the socket alive.
    headers = {"Cookie": cookie_for(alice), "Origin": server_url}
    with connect(url, additional_headers=headers, ping_interval=None) as socket:
        started = time.monotonic()
        try:
            message = socket.recv(timeout=IDLE_S)
        except TimeoutError:
            message = None  # nothing to say for a minute, and still open: as it should be
        except ConnectionClosed as closed:
            idle = time.monotonic() - started
            pytest.fail(f"the server closed the idle socket after {idle:.1f} s: {closed}")
        assert message is None, f"unexpected message on an idle paused session: {message}"

        event = events.emit(session.pk, "status", {"status": "paused"})
        received = json.loads(socket.recv(timeout=10))
        assert (received["type"], received["seq"]) == ("status", event.seq)
        socket.send(json.dumps({"command": "sync", "after": 0}))
        replayed = json.loads(socket.recv(timeout=10))
        assert replayed["seq"] == event.seq

    log = log_since(offset)
    assert "Timeout reading" not in log
    assert "Traceback" not in log
