"""Weight-only int8: a run is deterministic within int8 (resumes equal an uninterrupted int8
run, on both decode paths), and its snapshots are not taken for float ones."""

from __future__ import annotations

import pytest
import torch

from inference.decode import RunRequest
from inference.snapshot import SnapshotModelError
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.int8 import QMAX, Int8Linear
from inference.transformers_backend.runner import ModelRunner
from inference.transformers_backend.settings import StepSettings
from tests.inference.tiny import tiny_model

PROMPT = "The patient should take aspirin twice a day."
PARAMS = {"temperature": 0.9, "top_p": 0.95, "seed": 5, "max_new_tokens": 24}


@pytest.fixture(scope="module", params=[False, True], ids=["eager", "compiled"])
def int8_engine(request, tokenizer) -> Engine:
    settings = StepSettings(compile=request.param, weights="int8")
    return Engine(
        ModelRunner(tiny_model(len(tokenizer)), name="tiny", settings=settings), tokenizer
    )


def test_every_linear_weight_is_int8_with_a_scale_per_output(int8_engine):
    model = int8_engine.runner.model
    linears = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert len(linears) == 2 * 7 + 1  # q k v o gate up down per layer, and the head
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    for layer in linears:
        assert layer.int8_weight.dtype == torch.int8
        assert int(layer.int8_weight.abs().amax(1).min()) == QMAX  # each row uses its range


def test_it_stays_close_to_the_float_model(int8_engine, tokenizer):
    floats = ModelRunner(tiny_model(len(tokenizer)))
    ids = tokenizer.encode(PROMPT)
    logits = [
        r.forward(ids, r.new_cache(), keep=len(ids)).logits for r in (floats, int8_engine.runner)
    ]
    probs = [torch.softmax(x, -1) for x in logits]
    assert float((probs[0] - probs[1]).abs().max()) < 0.1  # random weights: a loose bound


def test_a_resumed_int8_run_equals_an_uninterrupted_one(int8_engine):
    engine = int8_engine
    full = engine.start(PROMPT, PARAMS)
    engine.run(full)
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=5))
    state = engine.restore(engine.snapshot(state))
    engine.run(state, RunRequest(pause_at=11))
    engine.truncate(state, 9)
    engine.run(state, RunRequest(pause_at=12))
    engine.run(state)
    assert state.generated_ids[:9] == full.generated_ids[:9]
    assert len(state.generated_ids) == len(full.generated_ids)
    assert state.generated_ids == full.generated_ids


def test_a_float_engine_refuses_an_int8_snapshot(int8_engine, engine):
    state = int8_engine.start(PROMPT, PARAMS)
    int8_engine.run(state, RunRequest(pause_at=3))
    assert int8_engine.runner.fingerprint != engine.runner.fingerprint
    with pytest.raises(SnapshotModelError):
        engine.restore(int8_engine.snapshot(state))
