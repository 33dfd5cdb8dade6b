"""The compiled decode step gives what the eager step gives, over a static cache whose
capacity follows the position through crops, growth and restores."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from inference import compile_cache, progress
from inference.decode import RunRequest
from inference.env import SettingError
from inference.sink import CollectingSink, TokenEvent
from inference.transformers_backend import compiled, kv_cache
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner
from inference.transformers_backend.settings import StepSettings
from tests.inference.tiny import tiny_model

PROMPTS = ["Hello world, hello model.", "The contract is void.", "Dosage: 3.5 mg per day"]
STEPS = 40
EAGER, COMPILED = StepSettings(compile=False), StepSettings(compile=True)


@pytest.fixture(scope="module")
def runners(tokenizer) -> dict[str, ModelRunner]:
    """The same weights behind each decode step."""
    return {
        "eager": ModelRunner(tiny_model(len(tokenizer)), settings=EAGER),
        "compiled": ModelRunner(tiny_model(len(tokenizer)), settings=COMPILED),
    }


def greedy(runner: ModelRunner, prompt: list[int], steps: int = STEPS):
    """Greedy tokens and each step's probabilities, step by step through ``runner``."""
    cache = runner.new_cache()
    logits = runner.forward(prompt, cache).logits[-1]
    tokens, probs = [], []
    for _ in range(steps):
        probs.append(torch.softmax(logits, -1))
        tokens.append(int(logits.argmax()))
        logits = runner.forward([tokens[-1]], cache).logits[-1]
    return tokens, probs, cache


def max_difference(probs: list[torch.Tensor], others: list[torch.Tensor]) -> float:
    return max(float((a - b).abs().max()) for a, b in zip(probs, others, strict=True))


def test_it_gives_the_eager_probabilities_and_greedy_tokens(runners, tokenizer):
    assert runners["compiled"].compiled and not runners["eager"].compiled
    for text in PROMPTS:
        prompt = tokenizer.encode(text)
        eager_tokens, eager_probs, _ = greedy(runners["eager"], prompt)
        tokens, probs, _ = greedy(runners["compiled"], prompt)
        assert tokens == eager_tokens
        assert max_difference(probs, eager_probs) < 1e-4


def test_it_crosses_a_capacity_and_keeps_agreeing(runners):
    prompt = [5 + i % 200 for i in range(kv_cache.MIN_CAPACITY - 10)]
    eager_tokens, eager_probs, _ = greedy(runners["eager"], prompt, 20)
    tokens, probs, cache = greedy(runners["compiled"], prompt, 20)
    assert cache.pinned.block.shape[4] == 2 * kv_cache.MIN_CAPACITY
    assert tokens == eager_tokens
    assert max_difference(probs, eager_probs) < 1e-4


def test_a_step_depends_on_the_position_not_on_what_the_cache_held_before(runners, tokenizer):
    """After a crop back below a capacity, or from a restored cache, a step takes the graph
    a run that never went further took: the same bits."""
    runner = runners["compiled"]
    prompt = tokenizer.encode(PROMPTS[0])
    tokens, probs, cache = greedy(runner, prompt, kv_cache.MIN_CAPACITY)
    assert cache.pinned.block.shape[4] == 2 * kv_cache.MIN_CAPACITY
    runner.crop(cache, len(prompt) + 5)
    copies = [(k.clone(), v.clone()) for k, v in runner.cache_tensors(cache)]
    restored = runner.cache_from_tensors(copies)
    for again in (cache, restored):
        logits = runner.forward([tokens[5]], again).logits[-1]
        assert torch.equal(torch.softmax(logits, -1), probs[6])
        assert again.pinned.block.shape[4] == kv_cache.MIN_CAPACITY


def test_past_the_models_positions_it_steps_eagerly(runners):
    prompt = [5 + i % 200 for i in range(500)]  # the tiny model knows 512 positions
    tokens, probs, cache = greedy(runners["compiled"], prompt, 20)
    assert runners["compiled"].cache_length(cache) == 520
    assert not runners["compiled"].step.covers(cache)
    eager_tokens, eager_probs, _ = greedy(runners["eager"], prompt, 20)
    assert tokens == eager_tokens and max_difference(probs, eager_probs) < 1e-4


def test_live_attention_rows_agree_with_the_eager_rows(tokenizer):
    rows = {}
    for name, settings in (("eager", EAGER), ("compiled", COMPILED)):
        engine = Engine(ModelRunner(tiny_model(len(tokenizer)), settings=settings), tokenizer)
        sink = CollectingSink()
        state = engine.start(PROMPTS[1], {"temperature": 0.0, "max_new_tokens": 10})
        engine.run(state, RunRequest(sink, live_attention="mean"))
        rows[name] = [torch.tensor(e.attention) for e in sink.of(TokenEvent)]
    assert [len(r) for r in rows["compiled"]] == [len(r) for r in rows["eager"]]
    for a, b in zip(rows["compiled"], rows["eager"], strict=True):
        assert torch.allclose(a, b, atol=1e-5) and float(a.sum()) == pytest.approx(1, abs=1e-5)


def test_the_warm_up_compiles_one_graph_for_every_capacity_and_says_so(runners, caplog):
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        runners["compiled"].step.warm_up()
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("compiling the decode step") and "done in" in said[-1]


def test_a_model_it_does_not_know_decodes_eagerly(caplog):
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=64)
    model = GPT2LMHeadModel(config).eval()
    assert "Llama" in compiled.unsupported(model)
    with caplog.at_level(logging.WARNING):
        runner = ModelRunner(model, settings=COMPILED)
    assert not runner.compiled and "decoding eagerly" in caplog.text


def test_compiled_code_is_kept_under_the_data_dir(monkeypatch, tmp_path):
    import torch._inductor.config  # noqa: F401 - it writes its /tmp default into the variable
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("CAESURA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # as inductor leaves it
    compile_cache.use_cache_dir()
    assert Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) == tmp_path / "compiled"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    compile_cache.use_cache_dir()
    assert Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) == tmp_path / "compiled"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")  # an operator's choice wins
    compile_cache.use_cache_dir(tmp_path / "other")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/elsewhere"


def test_the_settings_come_from_the_environment(monkeypatch):
    for name in ("CAESURA_COMPILE", "CAESURA_WEIGHTS"):
        monkeypatch.delenv(name, raising=False)
    assert StepSettings.from_env() == StepSettings()  # compiled, float weights
    monkeypatch.setenv("CAESURA_COMPILE", "0")
    monkeypatch.setenv("CAESURA_WEIGHTS", "INT8")
    assert StepSettings.from_env() == StepSettings(False, "int8")
    for name, value in [("CAESURA_COMPILE", "maybe"), ("CAESURA_WEIGHTS", "int4")]:
        monkeypatch.setenv(name, value)
        with pytest.raises(SettingError, match=name):
            StepSettings.from_env()
        monkeypatch.delenv(name)
