"""The channel layer (reviewer/events/channel_layer.py) against the real Redis: what reaches a
receiver, in what order, and how many commands each message costs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from channels.layers import get_channel_layer

from reviewer.events.channel_layer import RedisChannelLayer


def counting(layer: RedisChannelLayer) -> list[str]:
    """The Redis commands ``layer`` issues from now on, by name."""
    calls: list[str] = []
    real = layer.connection

    class Counted:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(self.client, name)

    layer.connection = lambda index: Counted(real(index))  # type: ignore[method-assign]
    return calls


@contextlib.asynccontextmanager
async def member_of(group: str) -> AsyncIterator[tuple[RedisChannelLayer, Any, str]]:
    """A sending layer of its own, the process's layer and one of its channels in ``group``."""
    sender, receiver = RedisChannelLayer(), get_channel_layer()
    channel = await receiver.new_channel()
    await receiver.group_add(group, channel)
    try:
        yield sender, receiver, channel
    finally:
        receiver.__dict__.pop("connection", None)  # the process's layer counts no more
        await receiver.group_discard(group, channel)
        await sender.close_pools()


async def test_it_receives_each_message_with_one_blocking_pop():
    async with member_of("layer-test") as (sender, receiver, channel):
        calls = counting(receiver)
        for n in range(3):
            await sender.group_send("layer-test", {"type": "session.event", "n": n})
        got = [await asyncio.wait_for(receiver.receive(channel), 5) for _ in range(3)]
        assert [m["n"] for m in got] == [0, 1, 2]
        # channels_redis's own receive issues four commands a message (a backup queue)
        assert calls == ["bzpopmin"] * 3


async def test_it_sends_to_a_group_in_two_round_trips():
    async with member_of("layer-test-send") as (sender, receiver, channel):
        calls = counting(sender)
        await sender.group_send("layer-test-send", {"type": "session.event", "n": 7})
        assert calls == ["pipeline", "pipeline"]
        assert (await asyncio.wait_for(receiver.receive(channel), 5))["n"] == 7


async def test_it_ends_a_receive_whose_cancel_was_dropped():
    """Python 3.11's ``asyncio.wait_for``, inside redis-py's send, can drop a cancel: the task
    is then asked to cancel (``cancelling()``) but runs on. Its receive must stop, not pop a
    quiet channel for ever."""
    async with member_of("layer-test-cancel") as (_, receiver, channel):

        async def receive_after_a_dropped_cancel() -> Any:
            asyncio.current_task().cancel()  # type: ignore[union-attr]
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)  # where the cancel is dropped
            return await receiver.receive(channel)

        task = asyncio.ensure_future(receive_after_a_dropped_cancel())
        done, _ = await asyncio.wait({task}, timeout=2)
        assert task in done and task.cancelled()
