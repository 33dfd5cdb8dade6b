"""The channel layer: channels_redis's, with fewer round trips to Redis per message.

- A group send: channels_redis sends four commands one after another (drop the group's
  lapsed members, read its members, drop each member's lapsed messages, push the message);
  every round trip waits for Redis and then, in a worker whose model keeps its cores busy,
  for the sending thread to run again. The first two go in one pipeline and the last two in
  another: the same commands, on the same keys, with the same effects.
- A receive: channels_redis keeps each message in a backup queue while it is handed over
  (a script that restores the backup, the blocking pop, an add to the backup, and a removal
  from it afterwards: four round trips per message), because its own add to the backup is a
  point where a cancelled receive could stop with the message in hand. Here a receive is the
  blocking pop alone, and nothing awaits between its reply and the message reaching the
  receivers' buffer (channels_redis's ``receive_single``), so there is no such point. The three
  extra round trips cost the web process and Redis about 0.5 ms of CPU a token (one gateway
  call streaming), taken from the model's two cores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels_redis import core

log = logging.getLogger(__name__)

CANCEL_AGAIN_S = 0.05  # how long a closing receiver waits for its receive before asking again


class RedisChannelLayer(core.RedisChannelLayer):  # type: ignore[misc]
    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        pipe = self.connection(self.consistent_hash(group)).pipeline(transaction=False)
        pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        pipe.zrange(key, 0, -1)
        _, members = await pipe.execute()
        names = [member.decode("utf8") for member in members]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(names, message)
        for index, keys in by_connection.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for channel_key in keys:
                pipe.zremrangebyscore(channel_key, min=0, max=int(time.time()) - int(self.expiry))
            args = [messages[k] for k in keys] + [capacities[k] for k in keys]
            pipe.eval(GROUP_SEND, len(keys), *keys, *args, time.time(), self.expiry)
            over_capacity = (await pipe.execute())[-1]
            if over_capacity > 0:
                log.info(
                    "%s of %s channels over capacity in group %s", over_capacity, len(names), group
                )

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> bytes | None:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # a cancel the send dropped (see above)
            raise asyncio.CancelledError
        result = await self.connection(index).bzpopmin(channel, timeout=timeout)
        return None if result is None else result[1]

    async def _clean_receive_backup(self, index: int, channel: str) -> None:
        """Nothing to clean: no backup queue is kept (see the module's docstring)."""


async def cancel_receive(task: asyncio.Task[Any]) -> None:
    """Cancel a receive (or a task awaiting one) and wait for its end, asking again until it
    ends: on Python 3.11 a cancel can be dropped inside redis-py's send (see _brpop_with_clean),
    and the receive would then stop only at its next blocking pop, up to 5 s later. Its end
    must come before its event loop's: the layer counts each loop's receivers."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN_S)
    if not task.cancelled():
        task.exception()  # retrieved: its owner logs what it needs to


# channels_redis's own script (core.RedisChannelLayer.group_send).
GROUP_SEND = """
    local over_capacity = 0
    local current_time = ARGV[#ARGV - 1]
    local expiry = ARGV[#ARGV]
    for i=1,#KEYS do
        if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
            redis.call('ZADD', KEYS[i], current_time, ARGV[i])
            redis.call('EXPIRE', KEYS[i], expiry)
        else
            over_capacity = over_capacity + 1
        end
    end
    return over_capacity
"""
