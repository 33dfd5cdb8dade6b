"""Build the transformers Engine from a local model directory."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from inference.text import Tokenizer
from inference.transformers_backend.engine import Engine
from inference.transformers_backend.runner import ModelRunner


def load_transformers_engine(
    path: Path, dtype: torch.dtype = torch.float32, record_similarity: bool = False
) -> Engine:
    """The model in ``path`` on the transformers runner (sdpa attention)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers types decode() for batches too (-> str | list[str]); the engine decodes
    # one sequence at a time, which gives a str: the Tokenizer protocol says so.
    tokenizer = cast(Tokenizer, AutoTokenizer.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    return Engine(ModelRunner(model, name=path.name), tokenizer, record_similarity)
