"""The JSON API's request bodies (reviewer/web/bodies.py): pydantic models whose fields are the
argument readers, refusing in the API's own words."""

from __future__ import annotations

import pytest
from django.test import override_settings

from reviewer.web import arguments, bodies
from reviewer.web.arguments import InvalidInput
from reviewer.web.command_table import COMMANDS


def refusal(model: type[bodies.CommandBody], data: dict) -> str:
    with pytest.raises(InvalidInput) as caught:
        bodies.read(model, data)
    return str(caught.value)


def test_it_names_every_missing_argument_at_once():
    assert refusal(bodies.EditBody, {"text": "x"}) == "start, end is required"
    assert refusal(bodies.StartBody, {}) == "domain, input is required"


@pytest.mark.parametrize("value", [2.5, 3.0, True, "3", -1, 2**31, None, [1], {"a": 1}])
def test_it_refuses_anything_but_a_json_integer_in_range(value):
    if value is None:  # null is absent: then the argument is missing
        assert refusal(bodies.RollbackBody, {"position": value}) == "position is required"
        return
    assert refusal(bodies.RollbackBody, {"position": value}) == (
        f"position must be a JSON integer from 0 to {2**31 - 1}, not {arguments.shown(value)}"
    )


def test_it_reads_what_services_take_without_the_command_id_or_other_keys():
    given = {
        "start": 1,
        "end": 2,
        "text": "x",
        "command_id": "c",
        "extra": [1],
        "glossary_term": None,
    }
    assert bodies.read(bodies.EditBody, given) == {"start": 1, "end": 2, "text": "x"}
    assert bodies.read(bodies.StartBody, {"domain": "d", "input": "  i ", "task_type": ""}) == {
        "domain": "d",
        "input": "i",
    }


def test_it_refuses_strings_the_database_cannot_store():
    assert refusal(bodies.RejectBody, {"comment": "a\x00b"}) == (
        "comment must not contain the NUL character"
    )
    assert "lone surrogate" in refusal(bodies.ReassignBody, {"reviewer": "\ud800"})
    assert refusal(bodies.PolicyBody, {"policy": "   "}) == "policy must not be empty"


def test_it_checks_a_text_limit_as_configured_when_the_body_is_read():
    with override_settings(CAESURA_MAX_EDIT_CHARS=3):
        message = refusal(bodies.EditBody, {"start": 0, "end": 0, "text": "four"})
    assert message == "text is 4 characters long; the limit is 3"
    assert bodies.read(bodies.EditBody, {"start": 0, "end": 0, "text": "four"})["text"] == "four"


def test_it_checks_decoding_by_the_sampling_parameters_json_types():
    start = {"domain": "d", "input": "i"}
    assert refusal(bodies.StartBody, {**start, "decoding": [1]}) == "decoding must be an object"
    assert refusal(bodies.StartBody, {**start, "decoding": {"top_k": 2.0}}).startswith(
        "decoding.top_k:"
    )
    assert refusal(bodies.StartBody, {**start, "decoding": {"wat": 1}}).startswith("decoding.wat:")
    for huge in (2**20 + 1, 2**64):  # past any vocabulary; 2**64 was stored as it came
        assert refusal(bodies.StartBody, {**start, "decoding": {"top_k": huge}}).startswith(
            "decoding.top_k: Input should be less than or equal to 1048576"
        )
    read = bodies.read(bodies.StartBody, {**start, "decoding": {"temperature": 1, "top_p": None}})
    assert read["decoding"] == {"temperature": 1.0}


def test_it_takes_a_command_id_as_a_bounded_string():
    assert bodies.command_id_of({"command_id": "a"}) == "a"
    assert bodies.command_id_of({"command_id": ""}) is None
    assert bodies.command_id_of({}) is None
    with pytest.raises(InvalidInput, match="command_id must be a string"):
        bodies.command_id_of({"command_id": 5})
    assert "the limit is 100" in refusal(bodies.CommandBody, {"command_id": "x" * 101})


def test_it_gives_every_command_a_body_model_listed_for_the_description():
    assert {command.body for command in COMMANDS.values()} <= set(bodies.MODELS)
    assert bodies.StartBody in bodies.MODELS
