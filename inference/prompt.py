"""Prompt -> token ids: the tokenizer's chat template, or plain text where it has none.

Messages may mark anchors (``<ANCHOR:NAME>…</ANCHOR>``) and ``<RECALL>`` for attention
gating (inference/gating.py): the model never reads the markers; ``encode_marked`` says
which prompt positions each anchor's text landed on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateError

from inference.gating import AnchorSpan, has_recall, parse_anchors
from inference.text import Detokenizer, Tokenizer

# A user message, chat messages ({"role": ..., "content": ...}), or token ids.
Prompt = str | Sequence[Mapping[str, str]] | Sequence[int]


@dataclass(frozen=True)
class MarkedPrompt:
    ids: list[int]
    anchors: list[AnchorSpan]  # [start, end) prompt positions of each anchor's tokens
    recall: bool  # a message carried <RECALL>


class PromptRefused(ValueError):
    """The model's chat template refuses the messages (some require a user turn first, or
    roles that alternate): a caller's input to refuse, not a failure of the engine."""


def encode_prompt(tokenizer: Tokenizer, prompt: Prompt, system: str | None = None) -> list[int]:
    """A string (user message), chat messages, or token ids -> prompt ids (markers stripped)."""
    return encode_marked(tokenizer, prompt, system).ids


def encode_marked(tokenizer: Tokenizer, prompt: Prompt, system: str | None = None) -> MarkedPrompt:
    """The prompt's ids without its markers, where its anchors are, and whether it asked
    for full attention. Bad markers (nested, unclosed) raise ValueError."""
    if not isinstance(prompt, str) and (not prompt or not isinstance(prompt[0], Mapping)):
        return MarkedPrompt(_encode(tokenizer, prompt, system), [], False)
    # Any: the items arrive from JSON (the check above found a message first).
    messages: list[Any] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    recall = any(has_recall(str(m["content"])) for m in messages)
    parsed = [parse_anchors(str(m["content"])) for m in messages]
    clean = [{**m, "content": text} for m, (text, _) in zip(messages, parsed, strict=True)]
    ids = _encode(tokenizer, clean, system)
    anchors = _anchor_positions(tokenizer, ids, parsed) if any(a for _, a in parsed) else []
    return MarkedPrompt(ids, anchors, recall)


def _anchor_positions(
    tokenizer: Tokenizer, ids: list[int], parsed: list[tuple[str, list[AnchorSpan]]]
) -> list[AnchorSpan]:
    """Each anchor's character span -> the prompt positions whose tokens spell it: the
    messages are found in order in the decoded prompt."""
    detok = Detokenizer()
    detok.extend(tokenizer, ids)
    pieces = _piece_spans(detok)
    found, cursor = [], 0
    for text, anchors in parsed:
        at = detok.text.find(text, cursor) if text else -1
        if at < 0:
            if anchors:
                raise ValueError("the anchored message cannot be found in the encoded prompt")
            continue
        cursor = at + len(text)
        for anchor in anchors:
            lo, hi = at + anchor.start, at + anchor.end
            hit = [i for i, (s, e) in enumerate(pieces) if s < hi and e > lo]
            if hit:
                found.append(AnchorSpan(anchor.name, hit[0], hit[-1] + 1))
    return found


def _encode(tokenizer: Tokenizer, prompt: Prompt, system: str | None = None) -> list[int]:
    # Any: the items arrive from JSON, and the first one tells which of the two lists it is.
    items: list[Any] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    if items and isinstance(items[0], int):
        return [int(i) for i in items]
    messages: list[Mapping[str, str]] = items
    if system and not any(m["role"] == "system" for m in messages):
        messages = [{"role": "system", "content": system}, *messages]
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.encode("\n".join(m["content"] for m in messages))
    # A final assistant message is a prefill: the answer continues it (vLLM's
    # continue_final_message) instead of starting a new turn after it.
    prefill = bool(messages) and messages[-1]["role"] == "assistant"
    try:
        encoded = tokenizer.apply_chat_template(
            messages,
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
            return_dict=True,
        )
    except TemplateError as exc:  # the template's own refusal (e.g. "roles must alternate")
        raise PromptRefused(f"The model's chat template refuses these messages: {exc}") from exc
    return list(encoded["input_ids"])


def user_text_spans(
    tokenizer: Tokenizer, prompt_ids: Sequence[int], text: str, system: str | None = None
) -> list[tuple[int, int] | None]:
    """For each position of ``prompt_ids`` (built from the user message ``text``), the
    characters ``[start, end)`` of ``text`` that its token spells; None for the chat
    template and the system prompt. All None where the text cannot be found in the prompt.

    The template is what ``prompt_ids`` shares with the same prompt around an empty message:
    the ids in between spell the message. A token that ends inside a character (a Chinese
    one is often split in three) is given the character that a later token completes."""
    ids = list(prompt_ids)
    spans: list[tuple[int, int] | None] = [None] * len(ids)
    empty = encode_prompt(tokenizer, "", system)
    head = _shared_length(ids, empty)
    tail = _shared_length(ids[head:][::-1], empty[head:][::-1])
    detok = Detokenizer()
    detok.extend(tokenizer, ids[head : len(ids) - tail])
    shift = _text_offset(detok.text, text)
    if shift is None:
        return spans
    for i, (start, end) in enumerate(_piece_spans(detok)):
        start, end = max(start - shift, 0), min(end - shift, len(text))
        if start < end:
            spans[head + i] = (start, end)
    return spans


def _shared_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _text_offset(decoded: str, text: str) -> int | None:
    """Where ``text`` starts in the decoded message ids (a template may add or trim
    whitespace around it)."""
    found = decoded.rfind(text)
    if found >= 0:
        return found
    stripped = text.strip()
    found = decoded.rfind(stripped) if stripped else -1
    return found - text.index(stripped) if found >= 0 else None


def _piece_spans(detok: Detokenizer) -> list[tuple[int, int]]:
    """Each token's [start, end) in ``detok.text``; an empty piece takes the next one's."""
    bounds = [*detok.starts, len(detok.text)]
    spans = list(zip(bounds, bounds[1:], strict=False))
    following = (len(detok.text), len(detok.text))
    for i in reversed(range(len(spans))):
        if spans[i][0] == spans[i][1]:
            spans[i] = following
        following = spans[i]
    return spans
