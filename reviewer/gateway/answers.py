"""Answers in the openai SDK's own types (ChatCompletion, ChatCompletionChunk, Completion,
Response, Model), each with ``usage``, a ``system_fingerprint`` of the model and a
``caesura`` object that standard clients ignore: the session, its review, pauses and edits."""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.urls import reverse

from reviewer import events
from reviewer.gateway.schemas import MODEL_PREFIX
from reviewer.lifecycle import claims
from reviewer.lifecycle.record import Token
from reviewer.models import Domain, PauseEvent, ReviewSession, statuses
from reviewer.models.domain import DELAYED

FINISH_REASONS = {"eos": "stop", "stop": "stop", "max_tokens": "length"}
NO_LOGPROB = -9999.0  # OpenAI's own floor for a probability too small to show


@functools.cache
def system_fingerprint() -> str:
    """Changes exactly when the model does: its name and its configuration."""
    config = settings.MODEL_DIR / "config.json"
    digest = hashlib.sha256(settings.MODEL_DIR.name.encode())
    if config.is_file():
        digest.update(config.read_bytes())
    digest.update(settings.CAESURA_BACKEND.encode())
    return "fp_" + digest.hexdigest()[:12]


@functools.cache
def created_at() -> int:
    config = settings.MODEL_DIR / "config.json"
    return int(config.stat().st_mtime) if config.is_file() else 0


def model_id(domain: Domain) -> str:
    return MODEL_PREFIX + domain.slug


def model_entry(domain: Domain) -> dict[str, Any]:
    return {
        "id": model_id(domain),
        "object": "model",
        "created": created_at(),
        "owned_by": f"caesura ({settings.MODEL_DIR.name})",
        "caesura": {
            "domain": domain.slug,  # as every answer's caesura object names it
            "domain_name": domain.name,
            "underlying_model": settings.MODEL_DIR.name,
            "delivery_mode": domain.delivery_mode,
            # Sentences held back in delayed delivery; nothing leaves before review otherwise.
            "delay_sentences": domain.delay_sentences if domain.delivery_mode == DELAYED else None,
            "max_wait_s": domain.max_wait_s,
        },
    }


def response_id(session_id: int) -> str:
    return f"resp_{session_id}"


def session_id_from(text: str) -> int | None:
    """The session behind a response or completion id (``resp_12``, ``chatcmpl-12``, ...)."""
    for prefix in ("resp_", "chatcmpl-", "cmpl-"):
        digits = text[len(prefix) :] if text.startswith(prefix) else ""
        # ASCII only: "²".isdigit() holds, int() refuses it; 18 digits fit a database key.
        if digits.isascii() and digits.isdigit() and len(digits) <= 18:
            return int(digits)
    return None


# --- what the caesura object says ------------------------------------------------------


def review_status(session: ReviewSession) -> str:
    if session.status == statuses.COMPLETED:
        return "approved"
    if session.status == statuses.REJECTED:
        return "rejected"
    if session.status in statuses.WAITING:
        return "claimed" if claims.holder(session) is not None else "waiting_for_reviewer"
    if session.status == statuses.RUNNING:
        return "generating"
    return session.status


def caesura_info(session: ReviewSession) -> dict[str, Any]:
    """What the application may know of its generation's review."""
    pauses = list(session.pauses.order_by("halted_at"))
    open_pause = next((p for p in reversed(pauses) if p.resumed_at is None), None)
    holder = claims.holder(session)
    return {
        "session_id": session.pk,
        "response_id": response_id(session.pk),
        "status": session.status,
        "review": {
            "status": review_status(session),
            "waiting_for_reviewer": session.status in statuses.WAITING and holder is None,
            "claimed_by": holder.username if holder is not None else None,
            "reviewer": session.reviewer_name or None,
            "pause_reason": told_reason(open_pause) if open_pause is not None else None,
            "waiting_since": session.waiting_since.isoformat() if session.waiting_since else None,
            "comment": session.decision_comment or None,
        },
        "domain": session.domain.slug,
        "delivery_mode": session.domain.delivery_mode,
        "delivered_chars": session.released_chars,
        "pauses": [
            {
                "position": p.position,
                "trigger": p.trigger,
                "reason": told_reason(p),
                "outcome": p.outcome,
            }
            for p in pauses
        ],
        "edits": session.edits.filter(applied=True).count(),
        "redline_url": reverse("api-redline", args=[session.pk]),
        "review_url": reverse("session-page", args=[session.pk]),
    }


def told_reason(pause: PauseEvent) -> str:
    """Why a generation paused, as its application is told: which policy, never the words.
    A policy's own reason quotes the text it stopped on (a pattern's match), which is
    unreviewed text and may be what the reviewer then removes."""
    if pause.trigger == "manual":
        return "paused by a reviewer"
    kind = f" ({pause.kind})" if pause.kind and pause.kind != "manual" else ""
    return f"paused by the policy {pause.trigger!r}{kind}"


def usage(session: ReviewSession) -> dict[str, int]:
    prompt, completion = len(session.prompt_ids), len(session.generated_ids)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


# --- logprobs -----------------------------------------------------------------------------


def logprob(probability: float | None) -> float:
    return math.log(probability) if probability else NO_LOGPROB


def token_logprob(token: Token, top: int) -> dict[str, Any]:
    """One token as OpenAI reports it. A token a reviewer wrote has no distribution it was
    drawn from: logprob 0 and no alternatives. The drawn token's logprob is its entry's among
    the alternatives where it is one (the engine works the two out apart, a few ulps off)."""
    drawn = token.signals.get("probability")
    listed = list(token.signals.get("alternatives") or []) if drawn is not None else []
    drawn = next((a["prob"] for a in listed if a.get("token_id") == token.token_id), drawn)
    return {
        **spelled(token.token_id, token.text),
        "logprob": logprob(drawn) if drawn is not None else 0.0,
        "top_logprobs": [
            {**spelled(a.get("token_id"), str(a["text"])), "logprob": logprob(a["prob"])}
            for a in listed[:top]
        ],
    }


def spelled(token_id: int | None, text: str) -> dict[str, Any]:
    """A token's ``token`` and ``bytes``: the bytes it stands for, and their text; a token
    that ends inside a character (its bytes are no text alone) is spelled as OpenAI does,
    ``bytes:\\xe4\\xbb``. Without an id (an old record): its text."""
    if token_id is None:
        return {"token": text, "bytes": list(text.encode())}
    from reviewer.web.tokenizer import token_bytes  # loads a tokenizer: lazily

    raw = token_bytes()(int(token_id))
    try:
        shown = raw.decode()
    except UnicodeDecodeError:
        shown = "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
    return {"token": shown, "bytes": list(raw)}


def spoken(tokens: Sequence[Token]) -> list[Token]:
    """The tokens that make the text. The engine keeps the end-of-text token it stopped on
    (no text of its own); OpenAI lists only the text's, whose bytes join to it."""
    if all(t.text for t in tokens):
        return list(tokens)
    from reviewer.web.tokenizer import special_ids  # loads a tokenizer: lazily

    return [t for t in tokens if t.text or t.token_id not in special_ids()]


def chat_logprobs(tokens: Sequence[Token], top: int) -> dict[str, Any]:
    return {"content": [token_logprob(t, top) for t in spoken(tokens)], "refusal": None}


def completion_logprobs(tokens: Sequence[Token], top: int, offset: int = 0) -> dict[str, Any]:
    tokens = spoken(tokens)
    offsets, at = [], offset
    for t in tokens:
        offsets.append(at)
        at += len(t.text)
    entries = [token_logprob(t, top) for t in tokens]
    return {
        "tokens": [e["token"] for e in entries],
        "token_logprobs": [e["logprob"] for e in entries],
        "top_logprobs": [{a["token"]: a["logprob"] for a in e["top_logprobs"]} for e in entries],
        "text_offset": offsets,
    }


# --- whole answers ------------------------------------------------------------------------


def chat_completion(
    session: ReviewSession, text: str, tokens: Sequence[Token], finish: str, top: int | None
) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text, "refusal": None},
        "finish_reason": finish,
        "logprobs": chat_logprobs(tokens, top) if top is not None else None,
    }
    return {**_head(session, "chat.completion"), "choices": [choice], "usage": usage(session)}


def chunk_head(session: ReviewSession, kind: str) -> dict[str, Any]:
    """What every chunk of a stream repeats (the caesura object, read from the session's
    pauses, claim and edits, comes with the last)."""
    prefix = {"chat.completion": "chatcmpl-", "chat.completion.chunk": "chatcmpl-"}
    return {
        "id": f"{prefix.get(kind, 'cmpl-')}{session.pk}",
        "object": kind,
        "created": int(session.created_at.timestamp()),
        "model": model_id(session.domain),
        "system_fingerprint": system_fingerprint(),
    }


def closing(session: ReviewSession, kind: str) -> dict[str, Any]:
    """The last chunk's head, with the session's review, and the usage chunk's."""
    return {"head": _head(session, kind), "usage": usage(session)}


def completion(
    session: ReviewSession, text: str, finish: str | None, logprobs: dict[str, Any] | None
) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": logprobs}
    return {**_head(session, "text_completion"), "choices": [choice], "usage": usage(session)}


def _head(session: ReviewSession, kind: str) -> dict[str, Any]:
    return {**chunk_head(session, kind), "caesura": caesura_info(session)}


def engine_finish(session: ReviewSession) -> str:
    """Why the engine last stopped generating (its finish event): eos, stop, max_tokens..."""
    finishes = session.events.filter(type=events.FINISH).order_by("-seq")
    payload = finishes.values_list("payload", flat=True).first()
    return str((payload or {}).get("reason") or "")


def response_status(session: ReviewSession) -> str:
    """OpenAI's status of the session as a response: an approved text the token limit cut
    short is ``incomplete`` (max_output_tokens), as OpenAI reports it, so a client can tell."""
    if session.status == statuses.DRAFT:
        return "queued"
    if session.status == statuses.COMPLETED:
        return "incomplete" if engine_finish(session) == "max_tokens" else "completed"
    if session.status == statuses.REJECTED:
        return "incomplete"
    if session.status == statuses.CANCELLED:
        return "cancelled"
    if session.status == statuses.FAILED:
        return "failed"
    return "in_progress"


def response(session: ReviewSession, text: str | None = None) -> dict[str, Any]:
    """The session as a Response object; its text only once approved (or ``text``: what
    the caller may see of it now)."""
    status = response_status(session)
    approved = session.status == statuses.COMPLETED
    finished = session.finished_at
    if text is None:
        text = session.text if approved else ""
    output = []
    if text or approved:
        output = [message_item(session, text, status if approved else "in_progress")]
    return {
        "id": response_id(session.pk),
        "object": "response",
        "created_at": session.created_at.timestamp(),
        # OpenAI's: set once the response completed, and only then.
        "completed_at": finished.timestamp() if finished and status == "completed" else None,
        "status": status,
        "background": bool(session.gateway.get("background")),
        "model": model_id(session.domain),
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "tools": [],
        "temperature": session.decoding.get("temperature"),
        "top_p": session.decoding.get("top_p"),
        "max_output_tokens": session.max_new_tokens,
        "error": {"code": "server_error", "message": session.error} if status == "failed" else None,
        "incomplete_details": incomplete_details(session) if status == "incomplete" else None,
        "usage": response_usage(session) if approved else None,
        "user": session.gateway.get("user"),
        "instructions": session.gateway.get("instructions"),
        "store": True,  # every generation is kept: its review and audit need it
        "caesura": caesura_info(session),
    }


def incomplete_details(session: ReviewSession) -> dict[str, str]:
    """Why an incomplete response is: the reviewer rejected it (OpenAI's content filter is
    the nearest reason a client knows), or the token limit cut the approved text short."""
    if session.status == statuses.REJECTED:
        return {"reason": "content_filter"}
    return {"reason": "max_output_tokens"}


def message_item(session: ReviewSession, text: str, status: str) -> dict[str, Any]:
    return {
        "id": f"msg_{session.pk}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [output_text(text)],
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_usage(session: ReviewSession) -> dict[str, Any]:
    counts = usage(session)
    return {
        "input_tokens": counts["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": counts["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts["total_tokens"],
    }
