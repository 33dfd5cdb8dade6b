"""The request a session was started with, as the worker reads it: the prompt to encode (a
gateway generation's chat messages or raw prompt ids, else the case text), the stop strings
that end its generation, the delivered text no automatic rollback may remove, and how its
tokens are written."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from inference.control import CANCEL
from inference.decode import DeliveryFloor, StopInfo
from inference.prompt import Prompt
from inference.state import DecodeState
from inference.text import stop_string_at
from reviewer.lifecycle import gateway
from reviewer.models import ReviewSession
from reviewer.models.domain import DELAYED
from reviewer.worker.pause_flags import RedisControl
from reviewer.worker.relay import EACH_AT_ONCE, Batching, Ending
from reviewer.worker.served_engine import ServedEngine

log = logging.getLogger(__name__)
GENERATED_ENDS = ("eos", "max_tokens", "stop")  # a run that ended by itself


def stop_strings(session: ReviewSession) -> tuple[str, ...]:
    """A gateway request's stop strings: the engine ends the run at the token that completes
    one (inference/decode.py, with every other reason to stop)."""
    return tuple(str(s) for s in session.gateway.get("stop") or ())


def delivery_floor(session: ReviewSession) -> DeliveryFloor | None:
    """A gateway generation under delayed delivery: what was sent, and the rule by which more
    is sent while it runs (reviewer/gateway/delivery.py). Nothing leaves before approval
    otherwise, so no floor is needed there."""
    if not session.from_gateway or session.domain.delivery_mode != DELAYED:
        return None
    return DeliveryFloor(session.released_chars, session.domain.delay_sentences)


def final_release(session: ReviewSession, control: RedisControl) -> Ending:
    """A delayed gateway generation that the system will approve on its end (its domain allows
    it and nothing paused it, asked as the run ends, not on the way to its first token): once
    the run ends by itself and no cancel waits, its final text (a stop string cut as
    ``cut_stop_string`` cuts it) may leave at once, with its last tokens (the relay). Anything
    else waits for the end's record, as before."""
    if not session.from_gateway or session.domain.delivery_mode != DELAYED:
        return lambda stop, state: None
    stops = stop_strings(session)

    def chars(stop: StopInfo, state: DecodeState) -> int | None:
        if stop.reason not in GENERATED_ENDS or not gateway.approves_unpaused(session):
            return None
        try:
            if control.waiting() == CANCEL:  # the cancel wins the end (record_stop)
                return None
        except Exception as exc:  # Redis out of reach: the end's record decides, as before
            log.warning("session %s: the final text waits for its record: %s", session.pk, exc)
            return None
        at = stop_string_at(state.text, stops) if stop.reason == "stop" else None
        return len(state.text) if at is None else at

    return chars


def relay_batching(session: ReviewSession) -> Batching:
    """How the segment's relay writes its tokens. A reviewer who started the session reads
    along and pauses at what they read: each token at once. A gateway generation's text leaves
    by sentences or after review, so its tokens go in runs, except where its domain streams
    every token (no delay) and while a reviewer's page follows it (the relay asks). Under
    delayed delivery the relay also locks the text each token releases (the rule and the
    stop strings it needs)."""
    domain = session.domain
    if not session.from_gateway:
        return EACH_AT_ONCE
    if domain.delivery_mode == DELAYED and not domain.delay_sentences:
        return Batching(delay_sentences=0, stops=stop_strings(session))
    tokens, hold_s = settings.CAESURA_GATEWAY_RELAY_TOKENS, settings.CAESURA_GATEWAY_RELAY_HOLD_MS
    if domain.delivery_mode != DELAYED:  # nothing leaves before review
        return Batching(tokens, hold_s / 1000)
    return Batching(tokens, hold_s / 1000, domain.delay_sentences, stop_strings(session))


def cut_stop_string(
    session: ReviewSession, state: DecodeState, engine: ServedEngine
) -> dict[str, Any] | None:
    """The stop string and whatever its last token brought after it are not part of the
    answer. Cut here, before the record is saved, so that the session's text (what a
    reviewer approves and the application receives) ends where the answer ends. Returns
    the cut as the finish event carries it (as an edit does: where it starts, every id, the
    new tokens' texts), so that whoever folds the events has the tokens the text is made of."""
    at = stop_string_at(state.text, stop_strings(session))
    if at is None:
        return None
    result = engine.replace_text(state, at, len(state.text), "")
    ids, starts = state.generated_ids, state.detok.starts
    bounds = [*starts[result.token_start :], len(state.text)]
    tokens = [{"text": state.text[a:b]} for a, b in zip(bounds, bounds[1:], strict=False)]
    return {"token_start": result.token_start, "token_ids": list(ids), "tokens": tokens}


def prompt_of(session: ReviewSession) -> Prompt:
    """A gateway generation's chat messages (or raw prompt ids); else the case text."""
    if messages := session.gateway.get("messages"):
        return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if prompt_ids := session.gateway.get("prompt_ids"):
        return [int(i) for i in prompt_ids]
    return session.input_text
