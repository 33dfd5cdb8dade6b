"""Attention gating on the tiny model: the settings, the anchors, what a gated step keeps, and
that an interrupted gated run equals an uninterrupted one."""

from __future__ import annotations

import pytest
import torch

from inference.backend import GATED_ATTENTION, UnsupportedFeature, check_attention
from inference.config import SamplingConfigError, SamplingParams
from inference.decode import RunRequest
from inference.gating import AnchorSpan, GateConfig, GateConfigError, parse_anchors, triggered
from inference.sink import CollectingSink, TokenEvent
from inference.state import Checkpoint
from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend import gated_attention

# A small gate, so that it leaves positions out of short tiny-model contexts.
GATE = {"mode": "gated", "sinks": 2, "window": 6, "top_k": 3, "wide_top_k": 7}
PARAMS = {"max_new_tokens": 40, "attention": GATE}
SEEDED = {**PARAMS, "temperature": 0.9, "seed": 5}
PROMPT = (
    "The patient should take aspirin twice a day. <ANCHOR:dx>Dr. Smith agrees.</ANCHOR> "
    "We recommend a follow-up visit in two weeks. Hello world, hello model."
)
DRIFT = {
    "name": "drift",
    "kind": "drift",
    "action": "rollback",
    "params": {"window": 3, "entropy_threshold": 0.001, "similarity_threshold": 1.0},
}


# ---- settings and markers -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"mode": "sparse"}, "attention.mode"),
        ({"top_k": -1}, "attention.top_k"),
        ({"window": 2.5}, "attention.window"),
        ({"sinks": True}, "attention.sinks"),
        ({"top_k": 20, "wide_top_k": 10}, "attention.wide_top_k"),
        ({"triggers": "history"}, "attention.triggers"),
        ({"triggers": ["history", ""]}, "attention.triggers"),
        ({"budget": 3}, "attention.budget"),
    ],
)
def test_it_refuses_a_bad_setting_naming_the_field(setting, field):
    with pytest.raises(GateConfigError, match=field.replace(".", r"\.")):
        GateConfig.from_dict(setting)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        SamplingParams.from_dict({"attention": setting})


def test_the_web_catches_a_bad_setting_as_a_sampling_error():
    with pytest.raises(SamplingConfigError, match=r"attention\.top_k"):
        SamplingParams.from_dict({"attention": {"mode": "gated", "top_k": -1}})
    assert SamplingParams.for_task("open", attention={"mode": "gated"}).attention.gated


def test_the_setting_rides_in_the_sampling_params_as_json():
    params = SamplingParams.from_dict(PARAMS)
    assert params.attention.gated and params.attention.top_k == 3
    stored = params.to_dict()
    assert stored["attention"]["triggers"] == list(GateConfig().triggers)
    assert SamplingParams.from_dict(stored) == params
    assert not SamplingParams().attention.gated  # full attention by default


def test_it_strips_anchor_markers_and_keeps_their_spans():
    clean, spans = parse_anchors("a <ANCHOR:dx>bc</ANCHOR> d <ANCHOR:f-u_2>e</ANCHOR><RECALL>")
    assert clean == "a bc d e"
    assert spans == [AnchorSpan("dx", 2, 4), AnchorSpan("f-u_2", 7, 8)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<ANCHOR:a>x<ANCHOR:b>y</ANCHOR></ANCHOR>", "do not nest"),
        ("<ANCHOR:a>never closed", "never closed"),
        ("stray </ANCHOR>", "closes no open anchor"),
        ("<ANCHOR:bad name>x</ANCHOR>", "letters, digits"),
    ],
)
def test_it_refuses_broken_markers(text, message):
    with pytest.raises(ValueError, match=message):
        parse_anchors(text)


def test_the_anchor_positions_spell_the_anchored_text(engine, tokenizer):
    state = engine.start(PROMPT, PARAMS)
    [anchor] = state.anchors
    assert anchor.name == "dx"
    spelled = tokenizer.decode(state.prompt_ids[anchor.start : anchor.end])
    assert "Dr. Smith agrees." in spelled and "<ANCHOR" not in tokenizer.decode(state.prompt_ids)
    assert len(spelled) < len("Dr. Smith agrees.") + 4  # no more than the anchored text


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("The patient was Previously", True),
        ("no prior", True),
        ("a prior, then", True),
        ("top priority", False),
        ("prehistory", False),
        ("患者既往", True),
        ("既往病史", True),
        ("nothing here", False),
    ],
)
def test_a_latin_trigger_stands_alone_and_a_chinese_one_is_found_inside_words(text, fires):
    assert triggered(text, GateConfig().triggers) is fires


def test_vllm_declares_no_gate_and_refuses_a_gated_run():
    check_attention(SamplingParams(), frozenset(), "vllm")  # full attention: fine
    with pytest.raises(UnsupportedFeature, match="cannot gate attention"):
        check_attention(SamplingParams.from_dict(PARAMS), frozenset(), "vllm")
    check_attention(SamplingParams.from_dict(PARAMS), frozenset({GATED_ATTENTION}), "x")


# ---- what a step keeps ------------------------------------------------------------------------
def test_a_step_keeps_sinks_window_and_anchors_and_top_k_more():
    config = GateConfig.from_dict(GATE)
    anchors = torch.tensor([10, 11, 12])
    fixed = gated_attention.fixed_positions(40, config, anchors)
    expected = {0, 1, 10, 11, 12, *range(34, 40)}
    assert set(fixed.nonzero().squeeze(1).tolist()) == expected
    mass = torch.rand(2, 40)
    mass[:, 20] = 5.0  # the heaviest position outside the fixed ones
    kept = gated_attention.select(mass, fixed, config.top_k)
    assert kept is not None and kept.shape == (2, len(expected) + 3)
    assert all(expected | {20} <= set(row.tolist()) for row in kept)
    short = gated_attention.fixed_positions(10, config, anchors)  # two positions left: keep all
    assert gated_attention.select(mass[:, :10], short, config.top_k) is None


def capturing(engine, state) -> gate_mod.Gate:
    gate = gate_mod.of(state.cache)
    assert gate is not None
    gate.capture = True
    return gate


def test_every_step_attends_to_every_anchor_position_and_leaves_others_out(engine):
    state = engine.start(PROMPT, PARAMS)
    gate = capturing(engine, state)
    anchor = set(range(state.anchors[0].start, state.anchors[0].end))
    checked = []

    class Check(CollectingSink):
        def on_token(self, event: TokenEvent) -> None:
            if state.pending is None:  # the last token's forward waits for a settle
                checked.append([set(row.tolist()) for c in gate.captured for row in c.kept])

    engine.run(state, RunRequest(Check()))
    assert len(checked) >= 30
    assert all(anchor <= kept for step in checked for kept in step)
    assert all(len(kept) < state.position for kept in checked[-1])  # the gate left some out


def test_token_events_carry_the_kept_count_and_a_sampled_hit_rate(engine):
    sink = CollectingSink()
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(sink))
    events = sink.of(TokenEvent)[:-1]  # the last one's forward is left pending
    anchor = state.anchors[0].end - state.anchors[0].start
    assert all(e.gate_kept == 2 + 6 + anchor + 3 for e in events)
    measured = [e for e in events if e.gate_hit_rate is not None]
    at = [len(state.prompt_ids) + e.position for e in measured]
    assert measured and all(p % gate_mod.MEASURE_EVERY == 0 for p in at)
    assert all(0.0 < e.gate_hit_rate < 1.0 for e in measured)
    full = CollectingSink()
    engine.run(engine.start(PROMPT, {"max_new_tokens": 3}), RunRequest(full))
    assert [e.gate_kept for e in full.of(TokenEvent)] == [None] * 3


def test_a_trigger_word_widens_the_gate_from_its_last_token_on(engine, tokenizer):
    state = engine.start(PROMPT, PARAMS)
    gate = gate_mod.of(state.cache)
    prompt_length = len(state.prompt_ids)
    words = tokenizer.encode(" hello the patient history of aspirin")
    gate.ids = gate.ids[:prompt_length] + words
    ends = next(i for i in range(len(words)) if "history" in tokenizer.decode(words[: i + 1]))
    ks = [gate.top_k_at(prompt_length + i) for i in range(len(words))]
    assert ks == [3] * ends + [7] * (len(words) - ends)
    assert gate.top_k_at(prompt_length - 1) == gated_attention.FULL  # the prompt runs full


def test_a_gated_run_differs_from_full_attention(engine):
    gated = engine.start(PROMPT, PARAMS)
    engine.run(gated)
    full = engine.start(PROMPT, {"max_new_tokens": 40})
    engine.run(full)
    assert gated.generated_ids != full.generated_ids


def test_recall_turns_the_gate_off_for_the_run(engine):
    recall = engine.start("<RECALL>" + PROMPT, PARAMS)
    assert recall.recall and gate_mod.of(recall.cache) is None
    engine.run(recall, RunRequest(pause_at=12))
    full = engine.start(PROMPT, {"max_new_tokens": 40})
    engine.run(full, RunRequest(pause_at=12))
    assert recall.generated_ids == full.generated_ids
    view = engine.attention(recall).gate
    assert view["mode"] == "recall" and set(view["reasons"]) == {"recall"}
    assert view["kept"] == view["total"] == recall.position


def test_the_pause_view_says_why_each_position_was_kept(engine):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=20))
    view = engine.attention(state)
    assert view.to_dict()["gate"] == view.gate
    gate, total = view.gate, state.position
    assert (gate["mode"], gate["total"], len(gate["reasons"])) == ("gated", total, total)
    anchor = state.anchors[0]
    assert gate["anchors"] == [{"name": "dx", "start": anchor.start, "end": anchor.end}]
    assert gate["reasons"][:2] == ["sink", "sink"] and gate["reasons"][-6:] == ["window"] * 6
    assert gate["reasons"][anchor.start : anchor.end] == ["anchor"] * (anchor.end - anchor.start)
    assert "heavy" in gate["reasons"] and None in gate["reasons"]
    assert 0.0 < gate["hit_rate"] < 1.0 and gate["kept"] < total


def test_the_gate_holds_under_five_percent_of_the_kv(engine):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state)
    gate = gate_mod.of(state.cache)
    assert 0 < gate.nbytes() <= 0.05 * engine.runner.cache_bytes(state.cache)


# ---- identity ---------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [PARAMS, SEEDED], ids=["greedy", "seeded"])
def test_pauses_snapshots_and_rebuilds_resume_to_the_uninterrupted_gated_tokens(engine, params):
    reference = engine.start(PROMPT, params)
    engine.run(reference)
    state = engine.start(PROMPT, params)
    for at in (3, 11, 12):
        assert engine.run(state, RunRequest(pause_at=at)).reason == "pause"
    restored = engine.restore(engine.snapshot(state))
    assert gate_mod.of(restored.cache) is not None and restored.anchors == state.anchors
    engine.run(restored, RunRequest(pause_at=25))
    rebuilt = engine.rebuild(Checkpoint.from_dict(restored.to_checkpoint().to_dict()))
    engine.run(rebuilt)
    assert rebuilt.generated_ids == reference.generated_ids


@pytest.mark.parametrize(
    "edit",
    [
        {"kind": "replace", "start": 0, "end": 0, "text": "Rest and history "},
        {"kind": "truncate", "position": 5},
    ],
    ids=["replace", "truncate"],
)
def test_an_edit_then_continuing_equals_a_fresh_gated_run_from_the_edited_ids(engine, edit):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=15))
    engine.edit(state, edit)
    edited = state.to_checkpoint()
    engine.run(state)
    fresh = engine.rebuild(edited)
    engine.run(fresh)
    assert fresh.generated_ids == state.generated_ids


def test_a_run_with_rollbacks_resumes_to_the_uninterrupted_gated_tokens(engine):
    params = {**SEEDED, "max_new_tokens": 16}
    reference = engine.start(PROMPT, params, [DRIFT])
    engine.run(reference)
    assert reference.rollbacks == 2
    state = engine.start(PROMPT, params, [DRIFT])
    engine.run(state, RunRequest(pause_at=6))
    rebuilt = engine.rebuild(engine.restore(engine.snapshot(state)).to_checkpoint())
    engine.run(rebuilt)
    assert rebuilt.generated_ids == reference.generated_ids
