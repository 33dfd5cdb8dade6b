"""Which context positions hold the case text: attention on them is attention on the case, and
attention elsewhere (the template, the system prompt, the text written so far) has left it."""

from __future__ import annotations

import functools
import logging

from reviewer.models import ReviewSession

log = logging.getLogger(__name__)


def case_positions(session: ReviewSession) -> frozenset[int] | None:
    """The prompt positions that spell the session's case text; None where they cannot be
    told (no prompt stored yet, the model's tokenizer not here)."""
    if not session.prompt_ids:
        return None
    return _positions(tuple(session.prompt_ids), session.domain.system_prompt, session.case_text)


@functools.lru_cache(maxsize=64)
def _positions(prompt_ids: tuple[int, ...], system_prompt: str, text: str) -> frozenset[int] | None:
    from inference.prompt import user_text_spans
    from reviewer.web.tokenizer import tokenizer  # loads a tokenizer: only when asked

    try:
        spans = user_text_spans(tokenizer(), prompt_ids, text, system=system_prompt or None)
    except (OSError, ValueError) as exc:  # no tokenizer for this model here
        log.info("case text positions unknown: %s", exc)
        return None
    found = frozenset(i for i, span in enumerate(spans) if span is not None)
    return found or None
