"""Build a VllmEngine from a local model directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from inference.progress import progress
from inference.text import Tokenizer, eos_ids
from inference.vllm_backend.settings import VllmSettings, prepare_environment

if TYPE_CHECKING:
    from inference.transformers_backend.engine import Engine
    from inference.vllm_backend.engine import VllmEngine


def load_vllm_engine(
    model_dir: str | Path,
    dtype: torch.dtype = torch.float32,
    settings: VllmSettings | None = None,
    reference: Callable[[], Engine] | None = None,
) -> VllmEngine:
    """The model in ``model_dir`` served by vLLM in this process. ``reference`` loads the
    transformers engine over the same weights, for attention and look-ahead at a pause
    (inference/loader.py hands it over). Raises ImportError with install instructions when
    vLLM is missing."""
    prepare_environment()
    try:
        from vllm import EngineArgs, LLMEngine
    except ImportError as exc:
        raise ImportError(
            f"the vllm backend needs vLLM: pip install --no-deps -r requirements-vllm.txt ({exc})"
        ) from exc
    from transformers import AutoTokenizer

    from inference.vllm_backend.engine import SnapshotIdentity, VllmEngine

    path = Path(model_dir)
    settings = settings or VllmSettings.from_env()
    tokenizer = cast(Tokenizer, AutoTokenizer.from_pretrained(path))  # see inference/loader.py
    fingerprint, ends = _model_facts(path, tokenizer)
    starting = "starting vLLM" + ("" if settings.enforce_eager else ", compiling on a first start")
    with progress(starting):
        llm = LLMEngine.from_engine_args(EngineArgs(**settings.engine_args(str(path), dtype)))
    identity = SnapshotIdentity(fingerprint, path.name, dtype)
    return VllmEngine(llm, tokenizer, identity, settings.max_model_len, ends, reference)


def _model_facts(path: Path, tokenizer: Tokenizer) -> tuple[str, frozenset[int]]:
    """The transformers runner's fingerprint of these weights (so snapshots of both
    backends name the same model) and the EOS ids, read from one load of the model."""
    from transformers import AutoModelForCausalLM

    from inference.transformers_backend.runner import model_fingerprint

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    facts = model_fingerprint(model), eos_ids(tokenizer, model)
    del model
    return facts
