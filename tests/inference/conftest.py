"""Fixtures: a tiny random Llama for fast tests, vLLM on the real default model for integration
(the transformers one, ``real_engine``, is shared with the web tests: tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner
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
def vllm_engine():
    """The default model served by vLLM in this process (about 20 s to start)."""
    pytest.importorskip("vllm", reason="vLLM is not installed (requirements-vllm.txt)")
    from inference.loader import default_model_dir, load_engine
    from inference.vllm_backend import load_vllm_engine
    from inference.vllm_backend.settings import VllmSettings

    path = default_model_dir()
    if not (path / "config.json").is_file():
        pytest.fail(f"the default model is missing at {path}")
    settings = VllmSettings(max_model_len=2048, max_num_seqs=16)
    return load_vllm_engine(path, settings=settings, reference=lambda: load_engine(path))


@pytest.fixture(params=["transformers", "vllm"])
def backend(request):
    """Each backend on the real model: the contract tests run against both."""
    return request.getfixturevalue(
        "real_engine" if request.param == "transformers" else "vllm_engine"
    )
