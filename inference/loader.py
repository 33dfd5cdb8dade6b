"""Load the configured model into an Engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import torch

from inference.backend import BACKENDS, Backend
from inference.engine import Engine
from inference.runner import ModelRunner
from inference.text import Tokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = "smollm2-135m-instruct"


class ModelNotFoundError(FileNotFoundError):
    """The model directory is missing; the message says where it was looked for."""


def default_model_dir() -> Path:
    """$CAESURA_MODEL, else $CAESURA_DATA_DIR/models/smollm2-135m-instruct
    (CAESURA_DATA_DIR defaults to <repo>/var)."""
    if os.environ.get("CAESURA_MODEL"):
        return Path(os.environ["CAESURA_MODEL"])
    data_dir = Path(os.environ.get("CAESURA_DATA_DIR") or REPO_ROOT / "var")
    return data_dir / "models" / DEFAULT_MODEL


def load_engine(
    model_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
    record_similarity: bool = False,
) -> Engine:
    """The transformers engine: the reference backend (live attention, hidden states).
    ``record_similarity``: every token's similarity to the prompt, drift policy or not."""
    return _load_transformers(model_path(model_dir), dtype, record_similarity)


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

        engine: Backend = load_vllm_engine(path, dtype)
        return engine
    return _load_transformers(path, dtype, record_similarity)


def model_path(model_dir: str | Path | None = None) -> Path:
    """``model_dir`` or the default; ModelNotFoundError if it holds no model."""
    path = Path(model_dir) if model_dir else default_model_dir()
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model at {path} (config.json missing). Prepare the default model "
            "(inference/preparation.py) or point CAESURA_MODEL at a local model directory."
        )
    return path


def _load_transformers(path: Path, dtype: torch.dtype, record_similarity: bool = False) -> Engine:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers types decode() for batches too (-> str | list[str]); the engine decodes
    # one sequence at a time, which gives a str: the Tokenizer protocol says so.
    tokenizer = cast(Tokenizer, AutoTokenizer.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    return Engine(ModelRunner(model, name=path.name), tokenizer, record_similarity)
