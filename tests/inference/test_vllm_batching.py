"""Many sessions in one vLLM engine: decoded in one batch, each stopping on its own."""

from __future__ import annotations

import pytest

from inference.control import ControlHandle
from inference.decode import RunRequest
from inference.sink import CollectingSink, FinishEvent, PauseNotice, TokenEvent

pytestmark = [pytest.mark.model, pytest.mark.slow]

PROMPTS = [
    "Name three fruits.",
    "What is the capital of France?",
    "Give one tip for sleeping well.",
    "Say hello in Spanish.",
]
PARAMS = [
    {"temperature": 0.0, "max_new_tokens": 12},
    {"temperature": 0.8, "seed": 3, "max_new_tokens": 12},
    {"temperature": 0.0, "max_new_tokens": 12},
    {"temperature": 0.7, "top_k": 20, "seed": 9, "max_new_tokens": 12},
]


@pytest.fixture(scope="module")
def alone(vllm_engine) -> list[list[int]]:
    """Each session's tokens when it runs by itself."""
    out = []
    for prompt, params in zip(PROMPTS, PARAMS, strict=True):
        state = vllm_engine.start(prompt, params)
        vllm_engine.run(state)
        out.append(list(state.generated_ids))
    return out


def test_sessions_decode_together_and_match_their_solo_runs(vllm_engine, alone):
    states = [vllm_engine.start(p, params) for p, params in zip(PROMPTS, PARAMS, strict=True)]
    sinks = [CollectingSink() for _ in states]
    generations = [vllm_engine.submit(s, RunRequest(k)) for s, k in zip(states, sinks, strict=True)]
    steps_before = vllm_engine.steps
    while not all(g.done for g in generations):
        vllm_engine.step()
    # one batch: about as many steps as the longest session, not the sum of all four
    assert vllm_engine.steps - steps_before <= max(len(a) for a in alone) + 2
    assert [s.generated_ids for s in states] == alone
    assert all(sink.of(FinishEvent) for sink in sinks)


def test_a_pause_leaves_the_batch_at_once_and_resumes_identically(vllm_engine, alone):
    control = ControlHandle()
    states = [vllm_engine.start(p, params) for p, params in zip(PROMPTS, PARAMS, strict=True)]
    sinks = [CollectingSink() for _ in states]
    generations = [
        vllm_engine.submit(states[0], RunRequest(sinks[0], pause_at=3)),
        vllm_engine.submit(states[1], RunRequest(sinks[1], control)),
        *(vllm_engine.submit(s, RunRequest(k)) for s, k in zip(states[2:], sinks[2:], strict=True)),
    ]
    with pytest.raises(ValueError, match="already generating"):
        vllm_engine.submit(states[2])
    ended_at: dict[int, int] = {}
    step = 0
    while not all(g.done for g in generations):
        if step == 5:
            control.request_pause("manual")
        step += 1
        for ended in vllm_engine.step():
            ended_at[generations.index(ended)] = step
    # step 1 is the prefill and draws token 0: pause_at=3 stops at step 4, while the
    # others are still generating; the manual pause is honoured at the very next step
    assert ended_at[0] == 4 and len(states[0].generated_ids) == 3
    assert ended_at[1] == 6 and len(states[1].generated_ids) == 5
    assert min(ended_at[2], ended_at[3]) > 6
    assert [type(e) for e in sinks[0].events[-1:]] == [PauseNotice]
    for state in states[:2]:
        vllm_engine.run(state)
    assert [s.generated_ids for s in states] == alone


def test_threads_share_one_engine_through_the_serving_loop(vllm_engine, alone):
    from concurrent.futures import ThreadPoolExecutor

    from inference.serving import ServingLoop

    loop = ServingLoop(vllm_engine)

    def session(i: int) -> list[int]:
        state = loop.call(lambda engine: engine.start(PROMPTS[i], PARAMS[i]))
        assert loop.run(state, RunRequest(pause_at=2 + i)).reason == "pause"
        loop.call(lambda engine: engine.signals(state))  # a reviewer looks at the pause
        loop.run(state)
        return state.generated_ids

    try:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            assert list(pool.map(session, range(len(PROMPTS)))) == alone
        with pytest.raises(ValueError, match="do not fit"):
            loop.call(lambda engine: engine.start(list(range(3000))))
    finally:
        loop.close()


def test_a_resume_reports_its_first_token_before_vllm_steps(vllm_engine, alone):
    """The first token after a pause is drawn from the logits kept at the pause (what the
    uninterrupted run drew it from), so it is out as soon as the run is submitted."""
    state = vllm_engine.start(PROMPTS[1], PARAMS[1])
    vllm_engine.run(state, RunRequest(pause_at=4))
    sink = CollectingSink()
    steps = vllm_engine.steps
    generation = vllm_engine.submit(state, RunRequest(sink))
    assert vllm_engine.steps == steps and sink.tokens == [alone[1][4]]  # before any step
    assert sink.of(TokenEvent)[0].position == 4
    vllm_engine.drive(generation)
    assert state.generated_ids == alone[1]


def test_a_resume_that_stops_at_once_never_reaches_vllm(vllm_engine):
    state = vllm_engine.start(PROMPTS[0], PARAMS[0])
    vllm_engine.run(state, RunRequest(pause_at=3))
    steps = vllm_engine.steps
    generation = vllm_engine.submit(state, RunRequest(pause_at=3))  # already there
    assert generation.done and generation.stop.reason == "pause" and generation.stop.position == 3
    assert vllm_engine.steps == steps and not vllm_engine.active
