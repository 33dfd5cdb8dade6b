"""Prompt -> token ids: the tokenizer's chat template, or plain text where it has none."""

from __future__ import annotations

from collections.abc import Sequence


def encode_prompt(tokenizer, prompt: str | Sequence, system: str | None = None) -> list[int]:
    """A string (user message), chat messages, or token ids -> prompt ids."""
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    prompt = list(prompt)
    if prompt and isinstance(prompt[0], int):
        return [int(i) for i in prompt]
    if system and not any(m["role"] == "system" for m in prompt):
        prompt = [{"role": "system", "content": system}, *prompt]
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.encode("\n".join(m["content"] for m in prompt))
    encoded = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, return_dict=True)
    return list(encoded["input_ids"])
