"""Attention gating on the real default model: anchors kept on every step of a long run, a
trigger word widening the gate at its last token, and gated identity through a pause, an
edit and a snapshot (the contract suite runs the rest of the identity tests gated)."""

from __future__ import annotations

import pytest

from inference.decode import RunRequest
from inference.gating import parse_anchors
from inference.state import Checkpoint
from inference.transformers_backend import gate as gate_mod

pytestmark = [pytest.mark.model, pytest.mark.slow]

GATE = {"mode": "gated", "sinks": 4, "window": 16, "top_k": 6, "wide_top_k": 20}
PROMPT = (
    "Write a progress note: 64-year-old man, <ANCHOR:symptom>2 days of chest pain on "
    "exertion</ANCHOR>, blood pressure 150/95, <ANCHOR:finding>ECG shows no ST "
    "elevation</ANCHOR>, troponin pending."
)

NOTE = (
    "Assessment: exertional chest pain in a man with hypertension and diabetes; the ECG "
    "is without acute changes and the troponin is pending. Plan: serial troponins, "
    "aspirin, a statin, blood pressure control and a stress test before discharge. "
)


def test_no_anchor_position_is_dropped_on_any_step_of_a_100_token_run(real_engine):
    """100 gated decode steps of the real model over a written note (teacher-forced: the
    model's own greedy note may end sooner), every layer's and head's kept set checked."""
    state = real_engine.start(PROMPT, {"max_new_tokens": 100, "attention": GATE})
    assert [a.name for a in state.anchors] == ["symptom", "finding"]
    gate = gate_mod.of(state.cache)
    gate.capture = True
    anchors = set(gate.anchors.tolist())
    note = real_engine.tokenizer.encode(NOTE * 4)[:100]
    assert len(note) == 100
    missing = []
    for step, token in enumerate(note):
        real_engine.runner.forward([token], state.cache)
        kept = [set(row.tolist()) for c in gate.captured for row in c.kept]
        assert len(kept) == real_engine.runner.num_layers * 3  # every layer, every KV head
        if not all(anchors <= k for k in kept):
            missing.append(step)
    assert missing == []
    assert gate.kept < state.cache.get_seq_length()  # the gate did leave positions out


def test_a_trigger_word_widens_the_gate_at_its_last_token(real_engine):
    # No anchors here: the window sliding off an anchor would change the count too.
    prompt = parse_anchors(PROMPT)[0] + " Keep it short, plain and in the third person."
    state = real_engine.start(prompt, {"max_new_tokens": 8, "attention": GATE})
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
