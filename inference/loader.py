"""Load the configured model into either backend: the one place that knows both.

Each backend builds itself from a model directory (``transformers_backend.loading``,
``vllm_backend.loading``); the loader picks one and hands the vLLM backend the
transformers engine it uses for attention and look-ahead, so neither backend imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from inference.backend import BACKENDS, Backend
from inference.env import data_dir
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.loading import load_transformers_engine
from inference.transformers_backend.settings import StepSettings

DEFAULT_MODEL = "smollm2-135m-instruct"


class ModelNotFoundError(FileNotFoundError):
    """The model directory is missing; the message says where it was looked for."""


def default_model_dir() -> Path:
    """$CAESURA_MODEL, else $CAESURA_DATA_DIR/models/smollm2-135m-instruct
    (CAESURA_DATA_DIR defaults to <repo>/var)."""
    if os.environ.get("CAESURA_MODEL"):
        return Path(os.environ["CAESURA_MODEL"])
    return data_dir() / "models" / DEFAULT_MODEL


def load_engine(
    model_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
    record_similarity: bool = False,
    settings: StepSettings | None = None,
) -> Engine:
    """The transformers engine: the reference backend (live attention, hidden states).
    ``record_similarity``: every token's similarity to the prompt, drift policy or not.
    ``settings``: compiled or eager step, float or int8 weights (default: the environment's)."""
    return load_transformers_engine(model_path(model_dir), dtype, record_similarity, settings)


def load_backend(
    backend: str = "transformers",
    model_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
    record_similarity: bool = False,
) -> Backend:
    """The model served by ``backend``: "transformers" (``load_engine``) or "vllm" (many
    sessions in one batch; inference/vllm_backend/). ValueError names the choices.
    ``record_similarity`` as for ``load_engine``; vLLM has no hidden states to record."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    path = model_path(model_dir)
    if backend == "vllm":
        from inference.vllm_backend import load_vllm_engine

        # The reference only serves pauses (attention, look-ahead): eager, with vLLM's weights.
        eager = StepSettings(compile=False)
        engine: Backend = load_vllm_engine(
            path, dtype, reference=lambda: load_engine(path, settings=eager)
        )
        return engine
    return load_transformers_engine(path, dtype, record_similarity)


def model_path(model_dir: str | Path | None = None) -> Path:
    """``model_dir`` or the default; ModelNotFoundError if it holds no model."""
    path = Path(model_dir) if model_dir else default_model_dir()
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model at {path} (config.json missing). Prepare the default model "
            "(inference/preparation.py) or point CAESURA_MODEL at a local model directory."
        )
    return path
