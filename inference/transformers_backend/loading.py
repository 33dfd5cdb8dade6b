"""Build the transformers Engine from a local model directory."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from inference.text import Tokenizer
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner
from inference.transformers_backend.settings import StepSettings


def load_transformers_engine(
    path: Path,
    dtype: torch.dtype = torch.float32,
    record_similarity: bool = False,
    settings: StepSettings | None = None,
) -> Engine:
    """The model in ``path`` on the transformers runner (sdpa attention). ``settings``: how
    the decode step runs (default: from the environment); a compiled step is compiled here,
    before the first session, with its progress logged."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers types decode() for batches too (-> str | list[str]); the engine decodes
    # one sequence at a time, which gives a str: the Tokenizer protocol says so.
    tokenizer = cast(Tokenizer, AutoTokenizer.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    runner = ModelRunner(model, name=path.name, settings=settings or StepSettings.from_env())
    if runner.step is not None:
        runner.step.warm_up()
    return Engine(runner, tokenizer, record_similarity)
