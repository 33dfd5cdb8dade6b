"""The model's tokenizer in the web process: enough to check that an input fits the context,
and to tell the session page which prompt tokens spell the case text."""

from __future__ import annotations

import functools
import logging
from typing import Any, cast

from django.conf import settings
from transformers import AutoConfig, AutoTokenizer

from inference.prompt import encode_prompt, user_text_spans
from inference.text import TokenBytes, Tokenizer
from reviewer.lifecycle.gate import case_text

log = logging.getLogger(__name__)


@functools.cache
def tokenizer() -> Tokenizer:
    # One sequence at a time, as the engine's loader types it (inference/loader.py).
    return cast(Tokenizer, AutoTokenizer.from_pretrained(settings.MODEL_DIR))


@functools.cache
def token_bytes() -> TokenBytes:
    return TokenBytes(tokenizer())


@functools.cache
def special_ids() -> frozenset[int]:
    """The tokenizer's special tokens (the end of a turn, of the text): no text of their own."""
    return frozenset(int(i) for i in getattr(tokenizer(), "all_special_ids", []))


@functools.cache
def context_length() -> int:
    config = AutoConfig.from_pretrained(settings.MODEL_DIR)
    return int(getattr(config, "max_position_embeddings", 2048))


def load_at_start() -> bool:
    """Load the tokenizer (and transformers with it: 2-3 s) while the process starts, not
    in the first request that checks an input's length; False where no model is installed."""
    if not (settings.MODEL_DIR / "config.json").is_file():
        log.warning("no model at %s: the tokenizer loads on first use", settings.MODEL_DIR)
        return False
    tokenizer()
    context_length()
    return True


def prompt_length(system_prompt: str, text: str) -> int:
    """Tokens of the prompt exactly as the engine will build it (see inference/prompt.py):
    the anchor markup is the engine's to read, not the model's."""
    text = case_text(text)[0]
    return len(encode_prompt(tokenizer(), text, system=system_prompt or None))


def text_length(text: str) -> int:
    """Tokens of generated text as an edit retokenizes it (see inference/edits.py): plain
    text, so a typed special token counts as the pieces it is split into."""
    return len(tokenizer().encode(text, add_special_tokens=False, split_special_tokens=True))


def case_map(prompt_ids: list[int], system_prompt: str, text: str) -> dict[str, Any]:
    """What the session page needs to show attention in the case text: each prompt token's
    text, and the characters of ``text`` (code points) it spells, or None for the template
    and the system prompt. ``prompt_ids`` may be empty before the worker has started: the
    prompt is then built as the engine will build it."""
    system = system_prompt or None
    text, anchors = case_text(text)
    ids = list(prompt_ids) or encode_prompt(tokenizer(), text, system=system)
    spans = user_text_spans(tokenizer(), ids, text, system=system)
    return {
        "promptLength": len(ids),
        "promptTokens": [tokenizer().decode([i], skip_special_tokens=False) for i in ids],
        "caseSpans": [list(span) if span else None for span in spans],
        "caseText": text,
        "caseAnchors": anchors,  # [{name, start, end}] in code points of caseText
    }
