"""Attention gating on the real default model: anchors kept on every step of a long run, a
trigger word widening the gate at its last token, and gated identity through a pause, an
edit and a snapshot (the contract suite runs the rest of the identity tests gated)."""

from __future__ import annotations

import pytest

from inference.decode import RunRequest
from inference.sink import CollectingSink, TokenEvent
from inference.state import Checkpoint
from inference.transformers_backend import gate as gate_mod

pytestmark = [pytest.mark.model, pytest.mark.slow]

GATE = {"mode": "gated", "sinks": 4, "window": 16, "top_k": 6, "wide_top_k": 20}
PROMPT = (
    "Write a progress note: 64-year-old man, <ANCHOR:symptom>2 days of chest pain on "
    "exertion</ANCHOR>, blood pressure 150/95, <ANCHOR:finding>ECG shows no ST "
    "elevation</ANCHOR>, troponin pending."
)


def test_no_anchor_position_is_dropped_on_any_step_of_a_100_token_run(real_engine):
    state = real_engine.start(PROMPT, {"max_new_tokens": 100, "attention": GATE})
    assert [a.name for a in state.anchors] == ["symptom", "finding"]
    gate = gate_mod.of(state.cache)
    gate.capture = True
    anchors = set(gate.anchors.tolist())
    missing: list[int] = []
    steps: list[int] = []

    class Check(CollectingSink):
        def on_token(self, event: TokenEvent) -> None:
            if state.pending is not None:  # a last token's forward waits for a settle
                return
            steps.append(event.position)
            kept = [set(row.tolist()) for c in gate.captured for row in c.kept]
            if len(kept) != real_engine.runner.num_layers * 3 or not all(
                anchors <= k for k in kept
            ):
                missing.append(event.position)

    real_engine.run(state, RunRequest(Check()))
    assert len(steps) >= 99 and missing == []
    assert gate.kept < state.position  # the gate did leave positions out


def test_a_trigger_word_widens_the_gate_at_its_last_token(real_engine):
    state = real_engine.start(PROMPT, {"max_new_tokens": 8, "attention": GATE})
    gate = gate_mod.of(state.cache)
    words = real_engine.tokenizer.encode(" The patient has a history of diabetes")
    kept = []
    for token in words:
        real_engine.runner.forward([token], state.cache)
        kept.append(gate.kept)
    last = next(
        i for i in range(len(words)) if "history" in real_engine.tokenizer.decode(words[: i + 1])
    )
    narrow = kept[0]
    widened = narrow + GATE["wide_top_k"] - GATE["top_k"]
    assert kept == [narrow] * last + [widened] * (len(words) - last)


def test_a_gated_run_paused_edited_and_snapshotted_equals_a_fresh_one(real_engine):
    params = {"max_new_tokens": 30, "attention": GATE}
    state = real_engine.start(PROMPT, params)
    real_engine.run(state, RunRequest(pause_at=10))
    real_engine.edit(state, {"kind": "replace", "start": 0, "end": 0, "text": "History: "})
    edited = state.to_checkpoint()
    restored = real_engine.restore(real_engine.snapshot(state))
    real_engine.run(restored, RunRequest(pause_at=20))
    real_engine.run(restored)
    fresh = real_engine.rebuild(Checkpoint.from_dict(edited.to_dict()))
    real_engine.run(fresh)
    assert fresh.generated_ids == restored.generated_ids
