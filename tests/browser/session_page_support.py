"""What the session page's race, key and phone browser tests share (no test of its own): a
worker that holds their sessions and never runs anything, so that an edit a page sends waits until the test applies it
as a worker reports it, whether or not a real worker runs in the same test session (another
test's, started once per run)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator

from django.db import DEFAULT_DB_ALIAS, connections

from reviewer import lifecycle
from reviewer.models import Edit, ReviewSession
from reviewer.worker import liveness
from tests.browser.stored_sessions import ALTERNATIVES

PIECE = re.compile(r"\s*[\w-]+|\s*[^\w\s]")  # "The", " patient", ..., "." as the stored text


@contextlib.contextmanager
def busy_worker() -> Iterator[Callable[[ReviewSession], ReviewSession]]:
    """``hold(session)``: the session is with a worker process that is alive (it holds its
    liveness lock, `reviewer/worker/liveness.py`) and busy: what is sent to it (an edit's
    segment, a resume) waits in its own queue, and no other worker takes the session over.
    Each test file makes it a fixture."""
    hostname = f"fix-page-busy-{uuid.uuid4().hex[:8]}@nowhere"
    worker = f"{hostname}{liveness.SEPARATOR}{uuid.uuid4().hex[:12]}"
    lock = connections.create_connection(DEFAULT_DB_ALIAS)
    with lock.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_lock_shared(%s, %s), pg_advisory_lock_shared(%s, %s)",
            [
                liveness.LOCK_SPACE,
                liveness.lock_key(worker),
                liveness.HOST_SPACE,
                liveness.lock_key(hostname),
            ],
        )

    def hold(session: ReviewSession) -> ReviewSession:
        ReviewSession.objects.filter(pk=session.pk).update(worker=worker)
        session.refresh_from_db()
        return session

    try:
        yield hold
    finally:
        release(hostname, worker, lock)


def release(hostname: str, worker: str, lock) -> None:
    # Nothing left for a real worker to take back once this one is gone: its sessions go to
    # no worker, and its queue is emptied.
    from celery.utils.nodenames import worker_direct

    from webapp.celery import app

    ReviewSession.objects.filter(worker=worker).update(worker="")
    with app.connection_for_write() as connection:
        worker_direct(hostname)(connection.default_channel).purge()
    lock.close()


def report(session: ReviewSession, edit: Edit) -> tuple[dict, list[str]]:
    """What a worker reports of ``edit`` applied to the session's text (one token a word), and
    the new pieces."""
    text, old = session.text, PIECE.findall(session.text)
    if edit.kind == "truncate":
        pieces = old[: edit.start]
        start, end = len("".join(pieces)), len(text)
        before, after = text[start:], ""
    elif edit.kind == "choose":
        start = end = len(text)
        before, after = "", edit.text_after
        pieces = [*old, after]
    else:
        start, end, after = edit.start, edit.end, edit.text_after
        before = text[start:end]
        pieces = PIECE.findall(text[:start] + after + text[end:])
    keep = 0
    while keep < min(len(old), len(pieces)) and old[keep] == pieces[keep]:
        keep += 1
    while keep and len("".join(pieces[:keep])) > start:
        keep -= 1
    tokens = [{"text": p, "top1": 0.5, "entropy": 1.0, "similarity": None} for p in pieces[keep:]]
    result = {
        "kind": edit.kind,
        "token_start": keep,
        "token_end": len(old),
        "new_token_end": len(pieces),
        "char_start": start,
        "char_end": end,
        "text_before": before,
        "text_after": after,
        "alternatives": ALTERNATIVES,
        "tokens": tokens,
        "lookahead": {"branches": []},
        "attention": {},
    }
    return result, pieces


def apply_edits(session_id: int) -> list[int]:
    """Every edit waiting for the worker, applied as the worker applies and reports it; the ids.
    Run off Playwright's thread: its event loop would keep the events from being sent."""
    done: list[int] = []

    def run() -> None:
        try:
            session = ReviewSession.objects.get(pk=session_id)
            for edit in lifecycle.pending_edits(session):
                result, pieces = report(session, edit)
                session.text = "".join(pieces)
                session.generated_ids = [1000 + i for i in range(len(pieces))]
                session.save(update_fields=["text", "generated_ids"])
                lifecycle.record_edit_applied(session, edit, result)
                done.append(edit.pk)
        finally:
            connections.close_all()  # this thread's

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return done


def sent_commands(page) -> list[dict]:
    """The commands the page sends from now on, as sent."""
    sent: list[dict] = []
    page.on(
        "websocket", lambda socket: socket.on("framesent", lambda p: sent.append(json.loads(p)))
    )
    return sent


def named(sent: list[dict], command: str | None = None) -> list[dict]:
    """The commands sent (a replay's `sync` is none), or those named ``command``."""
    return [
        c
        for c in sent
        if c.get("command") not in (None, "sync") and command in (None, c["command"])
    ]
