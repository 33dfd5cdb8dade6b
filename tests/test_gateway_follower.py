"""The gateway's follower of one session, over the real channel layer: a call that ends leaves
no receive behind, even one whose cancel was dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from reviewer.gateway.progress import Follower
from reviewer.models import ReviewSession
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def reads_closed():
    """The follower reads through sync_to_async's thread: its connection goes with the test."""
    yield
    await sync_to_async(connections.close_all)()


async def test_it_ends_its_receive_when_it_closes(alice):
    session = await database_sync_to_async(make_session)(alice, status=ReviewSession.RUNNING)
    follower = Follower(session.pk)
    await follower.open()
    await follower.wait(0.05)  # a quiet spell: the receive waits on
    receiving = follower._receiving
    assert receiving is not None and not receiving.done()
    await follower.close()
    assert receiving.done()


async def test_it_ends_a_receive_whose_cancel_was_dropped(alice, monkeypatch):
    """A cancel dropped inside the layer (Python 3.11's ``wait_for``, in redis-py's send) must
    not leave the receive running on after the call: the follower asks again."""
    session = await database_sync_to_async(make_session)(alice, status=ReviewSession.RUNNING)
    layer = get_channel_layer()
    real_receive = layer.receive
    dropped = asyncio.Event()

    async def dropping_the_first_cancel(channel: str) -> dict[str, Any]:
        try:
            return await real_receive(channel)
        except asyncio.CancelledError:
            dropped.set()
            await asyncio.Event().wait()  # runs on, as a receive that lost its cancel did
            raise

    monkeypatch.setattr(layer, "receive", dropping_the_first_cancel)
    follower = Follower(session.pk)
    await follower.open()
    await follower.wait(0.05)
    receiving = follower._receiving
    assert receiving is not None
    await asyncio.wait_for(follower.close(), 2)
    assert dropped.is_set() and receiving.done()


def test_it_reads_token_events_without_their_attention_rows(alice):
    from reviewer import events
    from reviewer.gateway.progress import read_events

    session = make_session(alice)
    row = [0.25] * 4000  # a long context's row: most of a token event's bytes
    events.emit(session.pk, "token", {"text": " fever", "token_id": 5, "attention": row})
    [read] = read_events(session.pk, 0)
    assert read["text"] == " fever" and read["token_id"] == 5
    assert "attention" not in read
