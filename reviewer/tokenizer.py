"""The model's tokenizer in the web process: enough to check that an input fits the context."""

from __future__ import annotations

import functools

from django.conf import settings
from transformers import AutoConfig, AutoTokenizer

from inference.prompt import encode_prompt


@functools.cache
def tokenizer():
    return AutoTokenizer.from_pretrained(settings.MODEL_DIR)


@functools.cache
def context_length() -> int:
    config = AutoConfig.from_pretrained(settings.MODEL_DIR)
    return int(getattr(config, "max_position_embeddings", 2048))


def prompt_length(system_prompt: str, text: str) -> int:
    """Tokens of the prompt exactly as the engine will build it (see inference/prompt.py)."""
    return len(encode_prompt(tokenizer(), text, system=system_prompt or None))


def text_length(text: str) -> int:
    """Tokens of generated text as an edit retokenizes it (see inference/edits.py): plain
    text, so a typed special token counts as the pieces it is split into."""
    return len(tokenizer().encode(text, add_special_tokens=False, split_special_tokens=True))
