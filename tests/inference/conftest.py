"""Fixtures: a tiny random Llama for fast tests, the real default model for integration."""

from __future__ import annotations

import pytest
import torch

from inference.engine import Engine
from inference.runner import ModelRunner
from tests.inference.tiny import tiny_model, tiny_tokenizer

CORES = torch.get_num_threads()


@pytest.fixture(autouse=True)
def threads(request):
    """The tiny model is fastest on one thread (no OpenMP hand-offs); the real one uses all."""
    torch.set_num_threads(CORES if request.node.get_closest_marker("model") else 1)
    yield
    torch.set_num_threads(CORES)


@pytest.fixture(scope="session")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="session")
def engine(tokenizer) -> Engine:
    return Engine(ModelRunner(tiny_model(len(tokenizer)), name="tiny"), tokenizer)


@pytest.fixture(scope="session")
def other_engine(tokenizer) -> Engine:
    """Same architecture and config, other weights."""
    return Engine(ModelRunner(tiny_model(len(tokenizer), seed=1), name="tiny-other"), tokenizer)


@pytest.fixture(scope="session")
def real_engine() -> Engine:
    from inference.loader import default_model_dir, load_engine

    path = default_model_dir()
    if not (path / "config.json").is_file():
        pytest.fail(
            f"the default model is missing at {path}: prepare it (inference/preparation.py) "
            "or set CAESURA_MODEL to a local model directory"
        )
    return load_engine(path)
