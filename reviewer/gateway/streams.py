"""Server-sent events: a delivery as OpenAI's streams put it. Chat and text completions send
``data: {chunk}`` lines and ``data: [DONE]``; a response's events carry ``sequence_number``
so that a client can resume after a dropped connection (``starting_after``). While a call
waits for review it sends ``: keep-alive`` comments, which clients skip."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from reviewer.gateway import answers
from reviewer.gateway.database import off_loop
from reviewer.gateway.delivery import Delivery, End, KeepAlive, Piece
from reviewer.gateway.errors import error_body
from reviewer.models import ReviewSession

KEEP_ALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
RESPONSE_CHUNK = 16  # characters per response.output_text.delta, so numbering is stable


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def load(session_id: int) -> ReviewSession:
    # The engine's meta (its histories, a number per token) is no part of an answer.
    sessions = ReviewSession.objects.select_related("domain", "claimed_by", "owner")
    return sessions.defer("engine_meta").get(pk=session_id)


async def built(make: Callable[..., dict[str, Any]], session_id: int, *args: Any) -> dict[str, Any]:
    """An answer built from the session as it is now (read off the event loop)."""
    return await off_loop(lambda: make(load(session_id), *args))()


def end_error(end: End, session_id: int) -> tuple[int, dict[str, Any]]:
    """A delivery that ended without approved text, as an error status and body."""
    rid = answers.response_id(session_id)
    if end.outcome == "timeout":
        message = (
            f"Generation {rid} is still waiting for review: {end.reason}. It goes on; pick the"
            f" result up later with GET /v1/responses/{rid}"
        )
        return 504, error_body(504, message, code="review_timeout")
    if end.outcome == "rejected":
        message = f"Generation {rid} was rejected by its reviewer: {end.reason}"
        return 422, error_body(422, message, code="rejected_by_reviewer")
    if end.outcome == "cancelled":
        return 422, error_body(422, f"Generation {rid} was cancelled", code="cancelled")
    return 500, error_body(500, f"Generation {rid} failed: {end.reason}", code="generation_failed")


def finish_reason(engine_reason: str) -> str:
    return answers.FINISH_REASONS.get(engine_reason, "stop")


async def completions(
    delivery: Delivery, session: ReviewSession, chat: bool, top: int | None, include_usage: bool
) -> AsyncIterator[bytes]:
    """A chat or text completion's chunks as its text may leave. Their head is the session's as
    the call started or joined it (nothing in it changes): no read while its worker prefills."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    session_id = session.pk
    head = answers.chunk_head(session, kind)
    if chat:
        yield sse({**head, "choices": [choice(chat, {"role": "assistant", "content": ""})]})
    # A text completion's offsets count from the start, by the tokens reported so far (a piece
    # of text may end inside a token, which its next piece then reports).
    reported = 0
    async for step in delivery.steps():
        if isinstance(step, KeepAlive):
            yield KEEP_ALIVE
        elif isinstance(step, Piece):
            logprobs = None
            if top is not None and chat:
                logprobs = answers.chat_logprobs(step.tokens, top)
            elif top is not None:
                logprobs = answers.completion_logprobs(step.tokens, top, offset=reported)
            reported += sum(len(token.text) for token in step.tokens)
            text = {"content": step.text} if chat else step.text
            yield sse({**head, "choices": [choice(chat, text, None, logprobs)]})
        elif step.outcome != "completed":
            yield sse(end_error(step, session_id)[1])
            return
        else:
            closed = await built(answers.closing, session_id, kind)
            reason = finish_reason(delivery.follower.finish_reason)
            empty: dict[str, Any] | str = {} if chat else ""
            yield sse({**closed["head"], "choices": [choice(chat, empty, reason)]})
            if include_usage:  # then the last chunk: the caesura object rides on it too
                yield sse({**closed["head"], "choices": [], "usage": closed["usage"]})
            yield DONE


def choice(
    chat: bool,
    content: dict[str, Any] | str,
    finish: str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    key = "delta" if chat else "text"
    return {"index": 0, key: content, "finish_reason": finish, "logprobs": logprobs}


# --- a response's events ----------------------------------------------------------------


class ResponseEvents:
    """A response's event stream, numbered the same way on every connection: four opening
    events, one delta per RESPONSE_CHUNK characters of released text (released text never
    changes), then the closing ones."""

    def __init__(self, session_id: int, starting_after: int) -> None:
        self.session_id, self.after = session_id, starting_after
        self.seq = -1

    def _numbered(self, kind: str, body: dict[str, Any]) -> bytes | None:
        self.seq += 1
        if self.seq <= self.after:
            return None
        return sse({"type": kind, "sequence_number": self.seq, **body}, event=kind)

    def _last_numbered(self, kind: str, body: dict[str, Any]) -> bytes:
        """An event under the number of the last one before it, which a client resumes after:
        the response's next event keeps its number on the next connection."""
        return sse({"type": kind, "sequence_number": max(self.seq, 0), **body}, event=kind)

    def _where(self) -> dict[str, Any]:
        return {"item_id": f"msg_{self.session_id}", "output_index": 0, "content_index": 0}

    async def stream(self, delivery: Delivery) -> AsyncIterator[bytes]:
        now = await built(answers.response, self.session_id)
        # The opening events show the response as it began, on every connection: a client
        # (the SDK's stream helper) builds the output from the events that follow.
        state = {**now, "status": "in_progress", "output": [], "usage": None}
        state |= {"completed_at": None, "error": None, "incomplete_details": None}
        opening: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": state}),
            ("response.in_progress", {"response": state}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": self._item("", "in_progress")},
            ),
            ("response.content_part.added", {**self._where(), "part": answers.output_text("")}),
        ]
        for kind, body in opening:
            if (line := self._numbered(kind, body)) is not None:
                yield line
        buffer = ""
        async for step in delivery.steps(start_at=0):
            if isinstance(step, KeepAlive):
                yield KEEP_ALIVE
                continue
            if isinstance(step, Piece):
                buffer += step.text
            # A text that may still grow (a wait that timed out) keeps its short tail: every
            # connection numbers the same deltas the same way, so a resumed one loses nothing.
            final = isinstance(step, End) and step.outcome != "timeout"
            while len(buffer) >= RESPONSE_CHUNK or (final and buffer):
                delta, buffer = buffer[:RESPONSE_CHUNK], buffer[RESPONSE_CHUNK:]
                body = {**self._where(), "delta": delta, "logprobs": []}
                if (line := self._numbered("response.output_text.delta", body)) is not None:
                    yield line
            if isinstance(step, End):
                async for line in self._closing(step, delivery.sent):
                    yield line
                return

    def _item(self, text: str, status: str) -> dict[str, Any]:
        content = [answers.output_text(text)] if text else []
        item = {"id": f"msg_{self.session_id}", "type": "message", "role": "assistant"}
        return {**item, "status": status, "content": content}

    async def _closing(self, end: End, sent: int) -> AsyncIterator[bytes]:
        state = await built(answers.response, self.session_id)
        closing: list[tuple[str, dict[str, Any]]]
        if end.outcome == "completed":  # approved: whole, or cut short by the token limit
            item = state["output"][0]
            text = item["content"][0]["text"]
            closing = [
                ("response.output_text.done", {**self._where(), "text": text, "logprobs": []}),
                (
                    "response.content_part.done",
                    {**self._where(), "part": answers.output_text(text)},
                ),
                (
                    "response.output_item.done",
                    {"output_index": 0, "item": self._item(text, item["status"])},
                ),
                (f"response.{state['status']}", {"response": state}),
            ]
        elif end.outcome == "rejected":
            closing = [("response.incomplete", {"response": state})]
        elif end.outcome == "failed":
            closing = [("response.failed", {"response": state})]
        else:  # cancelled, or waited too long: the stream ends, the response goes on
            status, body = end_error(end, self.session_id)
            error = {k: v for k, v in body["error"].items() if k != "type"}  # the event's own
            closing = [("error", {**error, "status": status})]
        for kind, body in closing:
            if kind == "error":  # ends this connection only: it takes no number of its own
                yield self._last_numbered(kind, body)
            elif (line := self._numbered(kind, body)) is not None:
                yield line
