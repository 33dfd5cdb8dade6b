"""Fixtures: a tiny random Llama for fast tests, vLLM on the real default model for integration
(the transformers one, ``real_engine``, is shared with the web tests: tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner
from inference.transformers_backend.settings import StepSettings
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


# The decode step's two paths. A test module that sets ``STEP_PATHS = BOTH_PATHS`` runs each
# of its tests on both (its ``engine`` fixture is parametrized), so that the identity
# guarantees are checked on each path against itself.
PATHS = {"eager": StepSettings(compile=False), "compiled": StepSettings(compile=True)}
BOTH_PATHS = tuple(PATHS)


def pytest_generate_tests(metafunc):
    paths = getattr(metafunc.module, "STEP_PATHS", None)
    if paths and "engine" in metafunc.fixturenames:
        metafunc.parametrize("engine", paths, indirect=True, scope="session")


@pytest.fixture(scope="session")
def engine(request, tokenizer) -> Engine:
    """The tiny model's engine; eager unless the module asks for both paths."""
    settings = PATHS[getattr(request, "param", "eager")]
    runner = ModelRunner(tiny_model(len(tokenizer)), name="tiny", settings=settings)
    return Engine(runner, tokenizer)


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
    eager = StepSettings(compile=False)  # as inference/loader.py builds vLLM's reference
    return load_vllm_engine(
        path, settings=settings, reference=lambda: load_engine(path, settings=eager)
    )


BACKEND_FIXTURES = {
    "transformers": "real_engine",
    "transformers-compiled": "compiled_real_engine",
    "vllm": "vllm_engine",
}


@pytest.fixture(params=list(BACKEND_FIXTURES))
def backend(request):
    """Each backend on the real model (the transformers one on both decode steps): the
    contract tests run against each."""
    return request.getfixturevalue(BACKEND_FIXTURES[request.param])
