"""The engine contract, on the real model, against both backends (transformers, on its eager
and its compiled decode step, and vLLM).

vLLM tests are skipped, saying why, where vLLM is not installed. Generations stay short:
each backend is loaded once per test session.
"""

from __future__ import annotations

import itertools

import pytest

from inference.backend import GATED_ATTENTION, Backend, UnsupportedFeature
from inference.control import ControlHandle
from inference.decode import DeliveryFloor, RunRequest
from inference.sink import (
    CollectingSink,
    FinishEvent,
    FlagEvent,
    PauseNotice,
    RollbackEvent,
    Sink,
    TokenEvent,
)
from inference.state import Checkpoint

pytestmark = [pytest.mark.model, pytest.mark.slow]

SYSTEM = "You are a careful clinical assistant."
PROMPT = "A patient has a mild headache. What can they take? Answer in two sentences."
GREEDY = {"temperature": 0.0, "max_new_tokens": 24}
SEEDED = {"temperature": 0.9, "top_p": 0.95, "seed": 11, "max_new_tokens": 24}
# Small enough that the gate leaves positions out of these short contexts.
GATED = {"mode": "gated", "sinks": 4, "window": 16, "top_k": 8, "wide_top_k": 24}
_references: dict[tuple[str, str], list[int]] = {}


def reference(engine, params: dict) -> list[int]:
    """The uninterrupted generation's ids, once per engine and parameters."""
    key = (str(id(engine)), repr(sorted(params.items())))
    if key not in _references:
        state = engine.start(PROMPT, params, system=SYSTEM)
        engine.run(state)
        _references[key] = list(state.generated_ids)
    return _references[key]


@pytest.fixture(params=["full", "gated"])
def attention(request, backend) -> dict:
    """The identity tests run with full and with gated attention (where the backend has it)."""
    if request.param == "full":
        return {}
    if GATED_ATTENTION not in backend.features:
        pytest.skip(f"the {backend.backend} backend refuses gated attention (tested below)")
    return {"attention": GATED}


class PauseAfter(Sink):
    """Asks for a pause, as a reviewer would, when token ``position`` arrives."""

    def __init__(self, control: ControlHandle, position: int) -> None:
        self.control, self.position, self.events = control, position, []

    def on_token(self, event: TokenEvent) -> None:
        if event.position == self.position:
            self.control.request_pause("manual")

    def on_pause(self, event: PauseNotice) -> None:
        self.events.append(event)


def test_both_backends_satisfy_the_protocol(backend):
    assert isinstance(backend, Backend)
    assert backend.backend in ("transformers", "vllm")


def test_it_pauses_at_the_asked_token_and_resumes_identically(backend, attention):
    params = {**GREEDY, **attention}
    state = backend.start(PROMPT, params, system=SYSTEM)
    stop = backend.run(state, RunRequest(pause_at=7))
    assert (stop.reason, stop.position, len(state.generated_ids)) == ("pause", 7, 7)
    assert stop.decision.kind == "manual"
    backend.run(state)
    assert state.generated_ids == reference(backend, params)


def test_a_manual_pause_stops_at_the_next_boundary(backend):
    control = ControlHandle()
    sink = PauseAfter(control, 4)
    state = backend.start(PROMPT, GREEDY, system=SYSTEM)
    stop = backend.run(state, RunRequest(sink, control))
    assert (stop.reason, len(state.generated_ids)) == ("pause", 5)
    assert sink.events[0].phase == "manual" and control.poll() is None
    backend.run(state)
    assert state.generated_ids == reference(backend, GREEDY)


def test_a_policy_pause_lands_on_the_triggering_token(backend):
    full = backend.start(PROMPT, GREEDY, system=SYSTEM)
    backend.run(full)
    word = [w for w in full.text.split() if w.isalpha() and len(w) > 4][1]
    policy = {"name": "term", "kind": "regex", "params": {"pattern": word}}
    state = backend.start(PROMPT, GREEDY, [policy], system=SYSTEM)
    stop = backend.run(state)
    assert stop.reason == "pause" and stop.decision.kind == "regex"
    assert state.text.endswith(word) and state.text.count(word) == 1
    backend.run(state)
    assert state.generated_ids == full.generated_ids


def test_an_after_token_pause_shows_the_next_token_and_answers_a_request(backend):
    full = backend.start(PROMPT, GREEDY, system=SYSTEM)
    backend.run(full)
    word = [w for w in full.text.split() if w.isalpha() and len(w) > 4][1]
    policy = {"name": "term", "kind": "regex", "params": {"pattern": word}}
    state = backend.start(PROMPT, GREEDY, [policy], system=SYSTEM)
    control = ControlHandle()
    sink = PauseAfter(control, len(reference(backend, GREEDY)))  # never: finds the hit
    first = backend.run(state, RunRequest(sink, control))
    assert sink.events[0].phase == "after_token"
    assert sink.events[0].signals == backend.signals(state)  # the next token's, not the last's

    state = backend.start(PROMPT, GREEDY, [policy], system=SYSTEM)
    sink = PauseAfter(control, first.position - 1)  # a click on the token the policy fires on
    stop = backend.run(state, RunRequest(sink, control))
    assert (stop.decision.kind, stop.position) == ("regex", first.position)
    assert control.poll() is None  # the click paused once, here
    assert backend.run(state, RunRequest(control=control)).reason != "pause"
    assert state.generated_ids == full.generated_ids


@pytest.mark.parametrize("params", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_several_pauses_and_a_snapshot_resume_to_the_uninterrupted_tokens(
    backend, params, attention
):
    params = {**params, **attention}
    state = backend.start(PROMPT, params, system=SYSTEM)
    for at in (3, 9, 10):
        assert backend.run(state, RunRequest(pause_at=at)).reason == "pause"
    restored = backend.restore(backend.snapshot(state))  # as another worker would
    assert restored.generated_ids == state.generated_ids and restored.text == state.text
    backend.run(restored, RunRequest(pause_at=17))
    rebuilt = backend.rebuild(restored.to_checkpoint())
    backend.run(rebuilt)
    assert rebuilt.generated_ids == reference(backend, params)


def test_the_backends_agree_on_tokens_alternatives_and_entropy(real_engine, vllm_engine):
    assert reference(real_engine, GREEDY) == reference(vllm_engine, GREEDY)
    sinks = []
    for engine in (real_engine, vllm_engine):
        state = engine.start(PROMPT, GREEDY, system=SYSTEM)
        sinks.append(CollectingSink())
        engine.run(state, RunRequest(sinks[-1], pause_at=9))
        sinks[-1].events.append(engine.signals(state))
    for a, b in zip(*(s.events for s in sinks), strict=True):
        if isinstance(a, TokenEvent):
            assert (a.token_id, a.text, a.text_offset) == (b.token_id, b.text, b.text_offset)
        a, b = (a.signals, b.signals) if not hasattr(a, "entropy") else (a, b)
        assert [x.token_id for x in a.alternatives] == [x.token_id for x in b.alternatives]
        for x, y in zip(a.alternatives, b.alternatives, strict=True):
            assert abs(x.prob - y.prob) < 1e-3
        assert abs(a.entropy - b.entropy) < 1e-3 and abs(a.top1_prob - b.top1_prob) < 1e-3


@pytest.mark.parametrize(
    "edit",
    [
        {"kind": "replace", "start": 0, "end": 0, "text": "Rest and "},
        {"kind": "truncate", "position": 5},
        {"kind": "choose", "token_id": 4835},
    ],
    ids=["replace", "truncate", "choose"],
)
def test_an_edit_then_continuing_equals_a_fresh_run_from_the_edited_ids(backend, edit, attention):
    state = backend.start(PROMPT, {**GREEDY, **attention}, system=SYSTEM)
    backend.run(state, RunRequest(pause_at=7))
    [result] = backend.edit(state, edit)
    assert result.kind == edit["kind"]
    edited = list(state.generated_ids)
    backend.run(state)
    fresh = backend.rebuild(Checkpoint(state.prompt_ids, edited, state.params.to_dict()))
    backend.run(fresh)
    assert fresh.generated_ids == state.generated_ids and fresh.text == state.text


def test_a_finished_run_reports_eos_or_its_limit(backend):
    sink = CollectingSink()
    state = backend.start(PROMPT, {**GREEDY, "max_new_tokens": 6}, system=SYSTEM)
    stop = backend.run(state, RunRequest(sink))
    assert (stop.reason, len(state.generated_ids)) == ("max_tokens", 6)
    [finish] = sink.of(FinishEvent)
    assert (finish.reason, finish.generated_tokens, finish.text) == ("max_tokens", 6, state.text)
    assert [e.position for e in sink.of(TokenEvent)] == list(range(6))


def test_vllm_refuses_what_it_cannot_do(vllm_engine):
    drift = {"name": "d", "kind": "drift"}
    with pytest.raises(UnsupportedFeature, match="hidden states"):
        vllm_engine.start(PROMPT, GREEDY, [drift])
    state = vllm_engine.start(PROMPT, GREEDY)
    with pytest.raises(UnsupportedFeature, match="attention"):
        vllm_engine.run(state, RunRequest(live_attention="mean"))


def test_vllm_refuses_a_gated_run(vllm_engine):
    assert GATED_ATTENTION not in vllm_engine.features
    with pytest.raises(UnsupportedFeature, match="cannot gate attention"):
        vllm_engine.start(PROMPT, {**GREEDY, "attention": GATED}, system=SYSTEM)


def test_a_gated_pause_shows_what_the_gate_left_out(real_engine):
    gated = real_engine.start(PROMPT, {**GREEDY, "attention": GATED}, system=SYSTEM)
    real_engine.run(gated, RunRequest(pause_at=12))
    full = reference(real_engine, GREEDY)
    view = real_engine.attention(gated).gate
    assert view["mode"] == "gated" and view["kept"] < view["total"] == gated.position
    assert 0.5 < view["hit_rate"] < 1.0
    real_engine.run(gated)
    assert len(gated.generated_ids) == len(full)


def test_vllm_shows_attention_at_a_pause_through_the_transformers_runner(real_engine, vllm_engine):
    import torch

    views = []
    for engine in (real_engine, vllm_engine):
        state = engine.start(PROMPT, GREEDY, system=SYSTEM)
        engine.run(state, RunRequest(pause_at=5))
        views.append(engine.attention(state, layer=3))
    a, b = views
    assert (a.tokens, a.prompt_length, a.layer) == (b.tokens, b.prompt_length, b.layer)
    assert torch.allclose(torch.tensor(a.layers), torch.tensor(b.layers), atol=1e-5)
    assert torch.allclose(torch.tensor(a.heads), torch.tensor(b.heads), atol=1e-5)


def test_vllm_looks_ahead_in_slices_as_the_transformers_engine_does(real_engine, vllm_engine):
    """The prefill over the paused context is a slice of its own, each branch forward one
    more; the attention asked next reuses that prefill."""
    branches, slices_run = [], []
    for engine in (real_engine, vllm_engine):
        state = engine.start(PROMPT, GREEDY, system=SYSTEM)
        engine.run(state, RunRequest(pause_at=5))
        candidates = [alt.token_id for alt in engine.signals(state).alternatives[:2]]
        slices, yields = engine.look_ahead_in_slices(state, candidates, 4), 0
        while True:
            try:
                next(slices)
            except StopIteration as done:
                branches.append(done.value)
                break
            yields += 1
        slices_run.append(yields)
    assert branches[0] == branches[1] and len(branches[0]) == 2
    assert slices_run[1] == slices_run[0] + 1  # the prefill, then the same forwards
    reference = vllm_engine.reference
    forwards = reference.runner.forward_calls
    vllm_engine.attention(state)
    assert reference.runner.forward_calls == forwards  # no new prefill
    vllm_engine.run(state, RunRequest(pause_at=7))
    vllm_engine.attention(state)  # another context: rebuilt
    assert reference.runner.forward_calls == forwards + 1


def test_a_vllm_pause_computes_nothing_past_it(vllm_engine):
    state = vllm_engine.start(PROMPT, GREEDY, system=SYSTEM)
    generation = vllm_engine.submit(state, RunRequest(pause_at=6))
    stop = vllm_engine.drive(generation)
    # one decision per generated token and one that stopped: no token drawn past the pause
    assert stop.position == 6 and generation.steps == 7
    assert not vllm_engine.active


def test_snapshots_of_both_backends_name_the_same_model(real_engine, vllm_engine):
    assert real_engine.runner.fingerprint == vllm_engine.fingerprint
    state = real_engine.start(PROMPT, GREEDY, system=SYSTEM)
    real_engine.run(state, RunRequest(pause_at=5))
    moved = vllm_engine.restore(real_engine.snapshot(state))  # its KV is not needed
    vllm_engine.run(moved)
    assert moved.generated_ids == reference(real_engine, GREEDY)


def test_a_vllm_snapshot_tells_the_transformers_engine_to_rebuild(real_engine, vllm_engine):
    from inference.snapshot import SnapshotFormatError

    state = vllm_engine.start(PROMPT, GREEDY, system=SYSTEM)
    vllm_engine.run(state, RunRequest(pause_at=4))
    with pytest.raises(SnapshotFormatError, match="rebuild from its token ids"):
        real_engine.restore(vllm_engine.snapshot(state))


def policy_specs(words: list[str]) -> dict[str, tuple[str, dict]]:
    """One spec per policy kind vLLM supports, each made to fire on PROMPT or its own."""
    tool_prompt = (
        'Reply with exactly this JSON and nothing else: {"action": "lookup", "drug": "aspirin"}'
    )
    return {
        "keyword": (PROMPT, {"kind": "keyword", "params": {"keywords": [words[2]]}}),
        "low_confidence": (PROMPT, {"kind": "low_confidence", "params": {"threshold": 0.3}}),
        "high_entropy": (PROMPT, {"kind": "high_entropy", "params": {"threshold": 2.0}}),
        "overconfidence": (
            PROMPT,
            {"kind": "overconfidence", "params": {"threshold": 0.5, "words": [words[0]]}},
        ),
        "sentence_count": (
            "Write two short sentences about water.",
            {"kind": "sentence_count", "params": {"every": 1}},
        ),
        "tool_call": (tool_prompt, {"kind": "tool_call", "params": {"key": "action"}}),
    }


KINDS = [
    "keyword",
    "low_confidence",
    "high_entropy",
    "overconfidence",
    "sentence_count",
    "tool_call",
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_supported_policy_pauses_vllm_where_it_pauses_transformers(
    real_engine, vllm_engine, kind
):
    text = real_engine.tokenizer.decode(reference(real_engine, GREEDY), skip_special_tokens=True)
    words = [w for w in text.split() if w.isalpha() and len(w) > 3]
    prompt, spec = policy_specs(words)[kind]
    spec = {"name": kind, "action": "pause", **spec}
    outcomes = []
    for engine in (real_engine, vllm_engine):
        state = engine.start(prompt, GREEDY, [spec], system=SYSTEM)
        stop = engine.run(state)
        reason = stop.decision.reason if stop.decision else None
        outcomes.append((stop.reason, stop.position, reason, state.text))
        engine.run(state)
        outcomes.append(list(state.generated_ids))
    assert outcomes[0][0] == "pause", f"{kind} did not fire: {outcomes[0]}"
    assert outcomes[:2] == outcomes[2:]


def test_it_keeps_to_the_pause_budget_and_flags_the_rest(backend):
    """A policy that fires on every token pauses only where the budget allows (not before
    the first word, then at least 8 tokens apart); the refused pauses arrive as flags."""
    always = {"name": "always", "kind": "low_confidence", "params": {"threshold": 1.0}}
    budget = {"per_100_tokens": 100, "min_distance": 8, "hold_until_first_word": True}
    state = backend.start(PROMPT, GREEDY, [always], system=SYSTEM, budget=budget)
    sink, positions = CollectingSink(), []
    while (stop := backend.run(state, RunRequest(sink))).reason == "pause":
        positions.append(stop.position)
    assert positions and all(b - a >= 8 for a, b in itertools.pairwise(positions))
    assert positions[0] > 0  # never before the first word
    assert any("not paused" in e.decision.reason for e in sink.of(FlagEvent))
    assert state.generated_ids == reference(backend, GREEDY)  # pausing never changes a token
    _budget_pauses.setdefault(backend.backend, positions)
    assert len(set(map(tuple, _budget_pauses.values()))) == 1  # the same on both backends


_budget_pauses: dict[str, list[int]] = {}


def test_a_vllm_rebuild_keeps_the_notes_and_continues_as_the_transformers_engine(
    real_engine, vllm_engine
):
    state = real_engine.start(PROMPT, GREEDY, system=SYSTEM)
    real_engine.run(state, RunRequest(pause_at=4))
    real_engine.add_note(state, " (It is now the next morning.)")
    record = Checkpoint.from_dict(state.to_checkpoint().to_dict())
    moved = vllm_engine.rebuild(record)
    assert moved.notes == state.notes and moved.to_checkpoint().notes == record.notes
    real_engine.run(state, RunRequest(max_new_tokens=10))
    vllm_engine.run(moved, RunRequest(max_new_tokens=10))
    assert moved.generated_ids == state.generated_ids


def test_no_automatic_rollback_takes_back_delivered_text(backend):
    """A drift that would roll back to the first token, with one character already delivered
    (RunRequest.floor): no backend cuts it; the drift arrives as a flag."""
    drift = {
        "name": "drift",
        "kind": "drift",
        "action": "rollback",
        "params": {"window": 3, "entropy_threshold": 0.001, "similarity_threshold": 1.0},
    }
    try:
        state = backend.start(PROMPT, SEEDED | {"max_new_tokens": 8}, [drift], system=SYSTEM)
    except UnsupportedFeature as exc:
        pytest.skip(f"{backend.backend} does not run the drift policy: {exc}")
    sink = CollectingSink()
    backend.run(state, RunRequest(sink, floor=DeliveryFloor(released=1)))
    assert not sink.of(RollbackEvent) and state.rollbacks == 0
    assert "drift" in [f.decision.kind for f in sink.of(FlagEvent)]
    assert [t.token_id for t in sink.of(TokenEvent)] == state.generated_ids
