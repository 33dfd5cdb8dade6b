"""The serving loop reads pause and cancel requests from memory: a Redis stall never delays a
step, a pause asked for before the stall lands, and one asked for during it lands after.

Redis is a server of this test's own, frozen with SIGSTOP (it keeps its connections and
answers nothing), for less than the client's socket timeout, so that a request written
during the stall waits for the thaw instead of being refused."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from inference.decode import RunRequest
from inference.sink import Sink
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner
from reviewer.web.health import redis_client
from reviewer.worker import flag_watcher, pause_flags
from tests.inference.tiny import tiny_model, tiny_tokenizer
from tests.redis_server import RedisServer

STEP_S = 0.01  # each step takes at least this long: a steady pace to compare with
STALL_S = 1.5  # under redis_client's 2 s socket timeout
SESSION = 990001  # no database row is needed: the flag is a Redis key


class Timed(Sink):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_token(self, event) -> None:
        self.times.append(time.monotonic())
        time.sleep(STEP_S)


@pytest.fixture
def redis_server(settings):
    server = RedisServer()
    server.start()
    settings.REDIS_URL = server.url
    settings.CAESURA_REDIS_GRACE_S = 30
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="module")
def engine() -> Engine:
    tokenizer = tiny_tokenizer()
    return Engine(ModelRunner(tiny_model(len(tokenizer)), name="tiny"), tokenizer)


def generate(engine: Engine, control, sink: Timed):
    state = engine.start("Hello there", {"temperature": 0.8, "seed": 1, "max_new_tokens": 480})
    return ThreadPoolExecutor(1).submit(engine.run, state, RunRequest(sink, control, 480))


def wait_tokens(sink: Timed, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(sink.times) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def largest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    return max((b - a for a, b in zip(inside, inside[1:], strict=False)), default=end - start)


def test_steps_go_on_during_a_stall_and_a_pause_asked_before_it_lands(engine, redis_server):
    control = pause_flags.RedisControl(SESSION)
    sink = Timed()
    run = generate(engine, control, sink)
    wait_tokens(sink, 5)
    redis_server.freeze()
    stalled_at = time.monotonic()
    time.sleep(STALL_S)
    redis_server.thaw()
    thawed_at = time.monotonic()
    pause_flags.request_pause(SESSION)  # Redis answers again: asked now, before the next stall
    redis_server.freeze()
    time.sleep(0.5)
    redis_server.thaw()
    stop = run.result(timeout=30)
    control.close()

    assert largest_gap(sink.times, stalled_at, thawed_at) < 0.25  # the stall delayed no step
    assert len([t for t in sink.times if stalled_at <= t <= thawed_at]) > STALL_S / STEP_S / 4
    assert stop.reason == "pause" and stop.decision.kind == "manual"


def test_a_pause_asked_during_a_stall_lands_once_redis_answers(engine, redis_server):
    control = pause_flags.RedisControl(SESSION)
    sink = Timed()
    run = generate(engine, control, sink)
    halted: list[float] = []
    run.add_done_callback(lambda _: halted.append(time.monotonic()))
    wait_tokens(sink, 5)
    redis_server.freeze()
    stalled_at = time.monotonic()
    asking = threading.Thread(target=pause_flags.request_pause, args=(SESSION,))
    asking.start()  # written during the stall: it waits for Redis to answer
    time.sleep(STALL_S)
    assert not run.done()  # the loop went on meanwhile
    thawing_at = time.monotonic()
    redis_server.thaw()
    thawed_at = time.monotonic()
    asking.join(timeout=5)
    stop = run.result(timeout=30)
    control.close()

    assert largest_gap(sink.times, stalled_at, thawed_at) < 0.25
    assert stop.reason == "pause" and stop.decision.kind == "manual"
    # It paused once Redis answered, not before (the announced request lands at once).
    assert halted and halted[0] >= thawing_at


class NoRounds(flag_watcher.FlagWatcher):
    """A watcher that reads no flag from Redis: only what the wake channel brings."""

    def _round(self, client) -> None:
        pass


def wait_for(check, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.005)
    return check()


def test_an_announced_request_reaches_its_control_from_the_message_itself(redis_server):
    control = pause_flags.RedisControl(SESSION, NoRounds())
    client = redis_client()
    assert wait_for(lambda: client.pubsub_numsub(flag_watcher.wake_channel())[0][1] >= 1)
    try:
        pause_flags.request_pause(SESSION)
        assert wait_for(lambda: control.poll() == "pause")  # no round trip back to Redis
        assert control.stamps["woke"] <= control.stamps["read"]
        control.clear()
        assert "honoured" in control.stamps
        pause_flags.request_cancel(SESSION)
        assert wait_for(lambda: control.poll() == "cancel")
        pause_flags.request_pause(SESSION)  # a cancel waits: the pause is neither stored nor told
        time.sleep(0.2)
        assert control.poll() == "cancel" and control.waiting() == "cancel"
    finally:
        control.close()


class HeldRounds(flag_watcher.FlagWatcher):
    """A watcher whose rounds run only when the test lets one: a delete waits as it may for
    INTERVAL_S."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed = threading.Semaphore(0)
        self.rounds = 0

    def _round(self, client) -> None:
        if self.allowed.acquire(blocking=False):
            super()._round(client)
            self.rounds += 1


def test_it_never_deletes_a_request_made_after_the_one_it_honoured(redis_server):
    watcher = HeldRounds()
    control = pause_flags.RedisControl(SESSION, watcher)
    client = redis_client()
    assert wait_for(lambda: client.pubsub_numsub(flag_watcher.wake_channel())[0][1] >= 1)
    try:
        pause_flags.request_pause(SESSION)
        assert wait_for(lambda: control.poll() == "pause")
        control.clear()  # honoured: its delete waits for the next round
        pause_flags.clear(SESSION)  # a resume clears the flag, and the reviewer pauses again
        pause_flags.request_pause(SESSION)
        assert wait_for(lambda: control.poll() == "pause")
        watcher.allowed.release()  # the round with the first pause's late delete
        assert wait_for(lambda: watcher.rounds == 1)
        assert control.waiting() == "pause" and control.poll() == "pause"
        control.clear()
        watcher.allowed.release()
        assert wait_for(lambda: control.waiting() is None)  # the honoured one is deleted
    finally:
        control.close()
