"""What text may leave Caesura now, by the domain's delivery mode, and the course of one call's
delivery from the first wait to the end.

- ``after_review``: nothing before a reviewer (or, where the domain allows it, the system)
  approved; then the approved text, whole.
- ``delayed``: the text as it is generated, but the last ``delay_sentences`` sentences (the
  one being written counts) held back; nothing more while the session is paused or waits
  for its decision; the rest after approval. What is sent is locked first
  (``released_chars``), and only while the session still runs: a reviewer can no longer
  change it, and nothing leaves that a reviewer at a pause may be changing. The worker locks
  the text each token releases as it stores the token (the token's ``released``,
  ``Follower.locked``), so a stream usually finds it locked; it locks itself only what it
  finds releasable beyond that.

Either way the text received equals the approved session's text, byte for byte. A stop
string is never released: the text is held from where one begins, and by its length but
one at the end (the engine may be about to complete it). A delayed generation that the
system approves on its end sends its held last sentence with its last tokens: the worker
locked the final text with them, before the end's record."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from inference.sentences import delayed_boundary
from reviewer.gateway.database import off_loop
from reviewer.gateway.progress import Follower
from reviewer.lifecycle import gateway
from reviewer.lifecycle.record import Token
from reviewer.models import statuses
from reviewer.models.domain import DELAYED


def releasable(
    mode: str, delay_sentences: int, status: str, text: str, stops: Sequence[str], released: int
) -> int:
    """How many characters of ``text`` may have left by now (never fewer than ``released``)."""
    if status == statuses.COMPLETED:
        return len(text)
    if mode != DELAYED or status != statuses.RUNNING:
        return released
    return max(released, delayed_boundary(text, delay_sentences, stops))


@dataclass(frozen=True)
class Piece:
    """Text released now, with the tokens it completes (for logprobs)."""

    text: str
    tokens: list[Token]


@dataclass(frozen=True)
class KeepAlive:
    pass


@dataclass(frozen=True)
class End:
    """How delivery ended: "completed", "rejected", "cancelled", "failed" or "timeout"."""

    outcome: str
    reason: str = ""


Step = Piece | KeepAlive | End


@dataclass
class Delivery:
    """One call's delivery of one session."""

    follower: Follower
    mode: str
    delay_sentences: int
    max_wait_s: float
    stops: Sequence[str] = ()
    sent: int = 0  # characters sent on this call
    tokens_sent: int = 0
    lock: bool = True  # streamed: what leaves is locked; else the approved text leaves whole
    keep_alive_s: float = 15.0  # an SSE comment this often while the call waits
    outcome: str = ""  # the End's, once delivery ended
    _sent_text: str = field(default="")

    async def steps(self, start_at: int = 0) -> AsyncIterator[Step]:
        """Pieces as they may leave, keep-alives while waiting, then the end. ``start_at``:
        characters the client already has (a resumed stream)."""
        self.sent = start_at
        waited_since = last_beat = time.monotonic()
        while True:
            piece = await self._release()
            if piece is not None:
                waited_since = time.monotonic()
                yield piece
            end = self._ended()
            now = time.monotonic()
            if end is None and now - waited_since > self.max_wait_s:
                end = End("timeout", f"waited longer than {self.max_wait_s:g} s for review")
            if end is not None:
                self.outcome = end.outcome
                yield end
                return
            if now - last_beat >= self.keep_alive_s:
                last_beat = now
                yield KeepAlive()
            await self.follower.wait(max(0.05, min(self.keep_alive_s - (now - last_beat), 5.0)))

    async def _release(self) -> Piece | None:
        row, text = self.follower.row, self.follower.text
        if row is None:
            return None
        if not self.lock and row.status != statuses.COMPLETED:
            return None  # an answer sent whole: the approved text, never a part edited since
        released = max(row.released_chars, self.follower.locked)
        upto = releasable(self.mode, self.delay_sentences, row.status, text, self.stops, released)
        upto = min(upto, len(text))
        if upto <= self.sent:
            return None
        if not await self._locked(row.status, upto):
            await self.follower.catch_up()  # it stopped running, or changed: read it again
            return None
        piece = Piece(text[self.sent : upto], self._tokens_upto(upto))
        self.sent = upto
        return piece

    async def _locked(self, status: str, upto: int) -> bool:
        """Whether the text up to ``upto`` may leave: approved text always; a stream's locked
        first, which fails once the session stopped running or its text may have changed since
        the follower read it (gateway.release)."""
        follower = self.follower
        if not self.lock or status == statuses.COMPLETED or upto <= follower.locked:
            return True
        return await off_loop(gateway.release)(follower.session_id, upto, follower.last_seq)

    def _tokens_upto(self, upto: int) -> list[Token]:
        """The tokens that end within the first ``upto`` characters, not sent before."""
        done, at = [], 0
        for i, token in enumerate(self.follower.tokens):
            at += len(token.text)
            if at > upto:
                break
            if i >= self.tokens_sent:
                done.append(token)
        self.tokens_sent += len(done)
        return done

    def _ended(self) -> End | None:
        row = self.follower.row
        if row is None or not row.final:
            return None
        if row.status == statuses.COMPLETED:
            return End("completed") if self.sent >= len(row.text) else None
        if row.status == statuses.REJECTED:
            return End("rejected", row.decision_comment or "rejected by its reviewer")
        if row.status == statuses.CANCELLED:
            return End("cancelled", "the generation was cancelled")
        return End("failed", row.error or "the generation failed")
