"""The model's tokenizer in the web process: enough to check that an input fits the context."""

from __future__ import annotations

import functools

from django.conf import settings
from transformers import AutoConfig, AutoTokenizer


@functools.cache
def tokenizer():
    return AutoTokenizer.from_pretrained(settings.MODEL_DIR)


@functools.cache
def context_length() -> int:
    config = AutoConfig.from_pretrained(settings.MODEL_DIR)
    return int(getattr(config, "max_position_embeddings", 2048))


def prompt_length(system_prompt: str, text: str) -> int:
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": text}]
    encoded = tokenizer().apply_chat_template(
        messages, add_generation_prompt=True, return_dict=True
    )
    return len(encoded["input_ids"])
