"""Pauses stop at the exact token: policies, the control handle, flags that do not stop."""

from __future__ import annotations

import re

import pytest

from inference.control import ControlHandle
from inference.decode import RunRequest
from inference.sink import CollectingSink, FlagEvent, PauseNotice, TokenEvent

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "We recommend a follow-up visit."
PARAMS = {"temperature": 0.8, "seed": 5, "max_new_tokens": 40}
AFTER = {"keyword", "regex", "overconfidence"}


@pytest.fixture(scope="module")
def reference(engine):
    state = engine.start(PROMPT, PARAMS)
    sink = CollectingSink()
    engine.run(state, RunRequest(sink))
    return state, sink.of(TokenEvent)


def needle(tokens: list[TokenEvent], after: int = 6) -> str:
    """A whole word the reference run produced, so text policies have something to find."""
    text = "".join(e.text for e in tokens)
    for match in re.finditer(r"(?<![A-Za-z])[A-Za-z]{2,}(?![A-Za-z])", text):
        if match.start() >= tokens[after].text_offset:
            return match.group()
    pytest.fail("the reference run produced no word to search for")


def first_text_hit(tokens: list[TokenEvent], pattern: str) -> int:
    """Index of the first token that completes a match (match end inside its text)."""
    text = ""
    for i, event in enumerate(tokens):
        text += event.text
        if any(m.end() > event.text_offset for m in re.finditer(pattern, text)):
            return i
    pytest.fail(f"{pattern!r} never matches the reference text")


def spec(kind: str, params: dict, action: str = "pause") -> dict:
    return {"name": f"test-{kind}", "kind": kind, "action": action, "params": params}


def kind_specs(reference) -> dict[str, dict]:
    state, tokens = reference
    word = needle(tokens)
    top1 = sorted(state.top1_history)
    entropies = sorted(state.entropy_history)
    return {
        "keyword": {"keywords": [word], "whole_word": False, "case_sensitive": True},
        "regex": {"pattern": re.escape(word)},
        "low_confidence": {"threshold": top1[len(top1) // 4]},
        "high_entropy": {"threshold": entropies[-len(entropies) // 4]},
        "overconfidence": {"threshold": top1[0] / 2, "words": [word]},
    }


def test_it_pauses_a_regex_at_the_token_completing_the_match(engine, reference):
    state0, tokens = reference
    word = needle(tokens)
    expected = first_text_hit(tokens, re.escape(word))
    state = engine.start(PROMPT, PARAMS, [spec("regex", {"pattern": re.escape(word)})])
    calls = engine.runner.forward_calls
    stop = engine.run(state)
    assert stop.reason == "pause" and stop.decision.kind == "regex"
    assert state.generated_ids == state0.generated_ids[: expected + 1]
    # exactly one forward per generated token: nothing computed past the pause
    assert engine.runner.forward_calls - calls == expected + 1


@pytest.mark.parametrize(
    "kind", ["keyword", "regex", "low_confidence", "high_entropy", "overconfidence"]
)
def test_each_policy_kind_pauses_where_it_flags(engine, reference, kind):
    state0, _ = reference
    params = kind_specs(reference)[kind]
    flagged = engine.start(PROMPT, PARAMS, [spec(kind, params, "flag")])
    sink = CollectingSink()
    assert engine.run(flagged, RunRequest(sink)).reason == "max_tokens"  # a flag never stops
    assert flagged.generated_ids == state0.generated_ids
    flags = sink.of(FlagEvent)
    assert flags, f"{kind} never fired on the reference run; the test would prove nothing"
    first = flags[0].position

    paused = engine.start(PROMPT, PARAMS, [spec(kind, params)])
    calls = engine.runner.forward_calls
    sink = CollectingSink()
    stop = engine.run(paused, RunRequest(sink))
    generated = first + 1 if kind in AFTER else first
    assert stop.reason == "pause" and stop.decision.kind == kind
    assert len(paused.generated_ids) == generated == stop.position
    assert engine.runner.forward_calls - calls == generated
    assert sink.of(PauseNotice)[0].phase == ("after_token" if kind in AFTER else "before_token")
    assert paused.generated_ids == state0.generated_ids[:generated]

    while engine.run(paused).reason == "pause":  # resume: no re-fire at the same token
        assert len(paused.generated_ids) > generated
    assert paused.generated_ids == state0.generated_ids


def test_a_before_token_pause_shows_the_next_token_alternatives(engine, reference):
    state0, _ = reference
    params = kind_specs(reference)["low_confidence"]
    state = engine.start(PROMPT, PARAMS, [spec("low_confidence", params)])
    sink = CollectingSink()
    engine.run(state, RunRequest(sink))
    pause = sink.of(PauseNotice)[0]
    assert pause.signals.top1_prob < params["threshold"]
    assert len(pause.signals.alternatives) == 5
    assert pause.to_dict()["signals"]["alternatives"][0]["prob"] == pause.signals.top1_prob


def test_an_after_token_pause_shows_the_next_token_alternatives(engine, reference):
    _, tokens = reference
    word = needle(tokens)
    state = engine.start(PROMPT, PARAMS, [spec("regex", {"pattern": re.escape(word)})])
    sink = CollectingSink()
    engine.run(state, RunRequest(sink))
    pause = sink.of(PauseNotice)[0]
    assert pause.phase == "after_token" and pause.signals.chosen_prob is None
    assert pause.signals == engine.signals(state)  # the token a reviewer may choose next
    assert pause.signals != sink.of(TokenEvent)[-1].signals  # not the token it drew last


class AskAt(CollectingSink):
    """Asks for a pause when token ``position`` arrives, as a reviewer's click would."""

    def __init__(self, control: ControlHandle, position: int) -> None:
        super().__init__()
        self.control, self.position = control, position

    def on_token(self, event: TokenEvent) -> None:
        super().on_token(event)
        if event.position == self.position:
            self.control.request_pause("reviewer asked")


def test_a_policy_pause_answers_a_pause_asked_for_meanwhile(engine, reference):
    state0, tokens = reference
    word = needle(tokens)
    hit = first_text_hit(tokens, re.escape(word))
    state = engine.start(PROMPT, PARAMS, [spec("regex", {"pattern": re.escape(word)})])
    control = ControlHandle()
    stop = engine.run(state, RunRequest(AskAt(control, hit), control))
    assert (stop.decision.kind, stop.position) == ("regex", hit + 1)
    assert control.poll() is None  # the reviewer's request paused once, here
    stop = engine.run(state, RunRequest(control=control))  # resumed: no manual pause at once
    assert stop.reason != "pause" and state.generated_ids == state0.generated_ids


def test_it_does_not_compute_past_a_requested_pause(engine):
    state = engine.start(PROMPT, PARAMS)
    calls = engine.runner.forward_calls
    assert engine.run(state, RunRequest(pause_at=0)).reason == "pause"
    assert state.generated_ids == [] and engine.runner.forward_calls == calls
    assert engine.run(state, RunRequest(pause_at=3)).reason == "pause"
    assert len(state.generated_ids) == 3 and engine.runner.forward_calls - calls == 3


def test_a_pause_asked_for_from_outside_is_a_manual_pause(engine):
    state = engine.start(PROMPT, PARAMS)
    control = ControlHandle()
    control.request_pause("reviewer asked")
    sink = CollectingSink()
    stop = engine.run(state, RunRequest(sink, control))
    assert (stop.reason, stop.decision.policy, stop.decision.kind) == ("pause", "manual", "manual")
    assert sink.of(PauseNotice)[0].phase == "manual"
    assert stop.decision.evidence["requested"] == "reviewer asked"
    assert control.poll() is None  # honoured once


def test_it_reports_tokens_and_finish_to_the_sink(engine, reference):
    state0, tokens = reference
    assert [e.token_id for e in tokens] == state0.generated_ids
    assert "".join(e.text for e in tokens) == state0.text
    assert all(e.signals.chosen_prob is not None for e in tokens)
    state = engine.start(PROMPT, {**PARAMS, "max_new_tokens": 3})
    sink = CollectingSink()
    engine.run(state, RunRequest(sink))
    assert sink.events[-1].to_dict()["type"] == "finish"
    assert sink.events[-1].reason == "max_tokens"


def test_it_stops_at_eos(engine, tokenizer):
    state = engine.start(PROMPT, PARAMS)
    eos = tokenizer.eos_token_id
    engine.choose_alternative(state, eos)
    assert engine.run(state).reason == "eos"
    assert state.generated_ids == [eos]
