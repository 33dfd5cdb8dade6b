"""The checkpoint record: one list of a paused state's fields, readable in its older forms."""

from __future__ import annotations

import json

from inference.decode import RunRequest
from inference.state import Checkpoint, DecodeState
from reviewer.lifecycle.record import engine_meta as session_meta
from tests.inference.snapshot_v1 import dumps_v1

PROMPT = "The contract is void."
PARAMS = {"temperature": 0.7, "seed": 3, "max_new_tokens": 20}
POLICIES = [
    {"name": "unsure", "kind": "low_confidence", "action": "flag", "params": {"threshold": 0.3}}
]
# A session's checkpoint meta as it was stored before the record existed.
OLD_META = {
    "attempt": 1,
    "rollbacks": 1,
    "conservative": False,
    "policy_state": {"version": 1, "fired": {"unsure": [[2, None, None]]}},
    "histories": None,
}


def paused(engine):
    state = engine.start(PROMPT, PARAMS, POLICIES)
    engine.run(state, RunRequest(pause_at=6))
    return state


def test_it_round_trips_a_paused_state_through_json(engine):
    record = paused(engine).to_checkpoint()
    again = Checkpoint.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record


def test_it_reads_a_session_meta_stored_before_the_record_existed(engine):
    state = paused(engine)
    columns = dict(prompt_ids=state.prompt_ids, generated_ids=state.generated_ids)
    record = Checkpoint.from_dict(OLD_META, **columns, params=PARAMS, policy_specs=POLICIES)
    assert session_meta(record) == OLD_META
    rebuilt = engine.rebuild(record)
    assert (rebuilt.attempt, rebuilt.rollbacks, rebuilt.conservative) == (1, 1, False)
    assert rebuilt.policies.state_dict()["fired"]["unsure"] == [[2, None, None]]
    assert rebuilt.text == state.text


def test_a_rebuild_with_two_rollbacks_and_no_word_on_it_decodes_conservatively(engine):
    record = Checkpoint.from_dict({"rollbacks": 2}, prompt_ids=[1, 2, 3], generated_ids=[])
    assert engine.rebuild(record).conservative


def test_it_restores_a_snapshot_whose_header_has_the_former_pause_fields(engine):
    state = paused(engine)
    data = dumps_v1(state, engine.runner, pause={"phase": "external"}, stop_reason="pause")
    assert engine.restore(data).summary() == state.summary()


def test_a_state_from_a_record_gives_the_record_back(engine):
    state = paused(engine)
    engine.add_note(state, " later")
    record = Checkpoint.from_dict(json.loads(json.dumps(state.to_checkpoint().to_dict())))
    again = DecodeState.from_checkpoint(record, state.detok)
    assert again.to_checkpoint() == record and again.notes == state.notes
