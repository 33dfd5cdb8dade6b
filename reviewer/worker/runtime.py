"""The worker's side of a review session: the engine, loaded once per process and owned by
a serving loop that generates for every session of this worker at once, and the frozen
states of paused sessions kept in memory (least recently used spill to the vault).

A segment runs until a pause, the end, a cancel or the token limit. The task that starts it
prepares the state (from memory, else the vault, else a rebuild from the token ids in
Postgres), hands it to the loop and returns: the worker takes the next command while the
session generates. The segment's relay (reviewer/worker/relay.py) stores what it produces and
reports its stop. Once a segment has started, its session's liveness lock, not the task's
message, is what brings it back if this process dies (reviewer/worker/heartbeat.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from inference.backend import LIVE_ATTENTION, Backend, UnsupportedFeature
from inference.control import CANCEL
from inference.decode import RunRequest, StopInfo
from inference.edits import EditError, EditResult
from inference.loader import load_backend
from inference.message import Message
from inference.serving import Served, ServingLoop
from inference.signals import Signals
from inference.sink import PauseNotice
from inference.snapshot import SnapshotError
from inference.state import DecodeState
from inference.text import REPLACEMENT
from reviewer import events, lifecycle
from reviewer.analytics import pause_models
from reviewer.events import watching
from reviewer.lifecycle import record
from reviewer.lifecycle.transitions import latest_open_pause
from reviewer.models import Edit, ReviewSession, statuses
from reviewer.worker import details, liveness, request, vault
from reviewer.worker.pause_flags import RedisControl
from reviewer.worker.relay import Relay
from reviewer.worker.served_engine import ServedEngine
from reviewer.worker.state_cache import StateCache
from reviewer.worker.vault import VaultError

log = logging.getLogger(__name__)

LOOKAHEAD_BRANCHES = 3  # the top alternatives previewed (reviewer/worker/details.py)


@functools.cache
def serving() -> ServingLoop:
    """CAESURA_BACKEND's engine, loaded once by its loop's thread (inference/serving.py says why),
    recording each token's similarity to the prompt where it can: drift calibrates on any session."""
    model = settings.CAESURA_BACKEND, settings.MODEL_DIR
    load = functools.partial(load_backend, *model, record_similarity=True)
    return ServingLoop(load=load, on_failure=engine_failed)


def engine_failed(exc: BaseException) -> None:
    """The engine itself failed: its sessions were told, and this process stops taking
    work (a warm shutdown) so that its liveness lock goes and other workers take over."""
    log.critical("the engine failed (%s: %s); this worker shuts down", type(exc).__name__, exc)
    os.kill(os.getpid(), signal.SIGTERM)


@functools.cache
def engine() -> ServedEngine:
    """The engine as this thread may use it: every call runs in the serving loop."""
    return Served(serving())


states = StateCache(settings.CAESURA_WORKER_STATE_BUDGET_MB * 1024 * 1024)


# --- a segment -----------------------------------------------------------------------------


def run_segment(session_id: int, segment: str, hostname: str) -> str:
    """Prepare the session's segment and hand it to the serving loop; "generating" once it
    runs there (its relay reports the stop), or what ended it before."""
    if not is_current(session_id, segment):
        return "stale"  # before waiting for the segment that runs, or touching its pause
    wait_for_previous_segment(session_id)
    session = lifecycle.begin_segment(session_id, segment, liveness.identity(hostname))
    if session is None:
        return "stale"
    describer.supersede(session_id)  # what was read of the last pause is stale from here
    pause_models.ensure_files(session.policy_specs)  # a learned model kept in Postgres only
    if not session.prompt_ids:  # a new generation: nothing to edit or tell yet
        if session.status != statuses.RUNNING:  # as read under the claim's lock
            return "stale"
        start_generating(session, None)
        return "generating"
    state = load_state(session)
    state.policies.mute(session.muted_policies)  # as the reviewer left it, from this segment on
    edited = apply_pending_edits(session, state)
    if not lifecycle.generates(session):  # edits applied at a pause: it stays paused
        keep_paused(session, state, edited)
        return "edited"
    tell_pending_note(session, state)
    start_generating(session, state)
    return "generating"


def is_current(session_id: int, segment: str) -> bool:
    """Whether ``segment`` is the session's segment and the session goes on: a first look,
    without the lock that ``begin_segment`` claims it under. What looks stale is looked at
    again under the row's lock: a redispatch sends its task before it commits (reviewer/
    lifecycle/reports.py), and a worker that takes the task first would read the segment
    before it and drop the only task that runs the session."""
    sessions = ReviewSession.objects.filter(pk=session_id, segment=segment)
    if sessions.exclude(status__in=statuses.FINAL).exists():
        return True
    with transaction.atomic():  # waits for a transaction that holds the row, then reads
        row = ReviewSession.objects.select_for_update().filter(pk=session_id)
        found = row.values_list("segment", "status").first()
    return found is not None and found[0] == segment and found[1] not in statuses.FINAL


def start_generating(session: ReviewSession, state: DecodeState | None) -> None:
    """Generate in the serving loop; a new session (``state`` None) is prefilled there."""
    control = RedisControl(session.pk)

    def finish(stop: StopInfo, halted_at: float | None, notice: PauseNotice | None) -> str:
        assert relay.state is not None, "a run stops after its state is made"
        return finish_segment(
            session, relay.state, stop, control, halted_at, notice, relay.halt_timing, relay.stored
        )

    relay = Relay(
        session,
        state,
        record.stored_record,
        finish,
        loop_timing=serving().timing,
        batching=request.relay_batching(session),
        watched=functools.partial(watching.is_watched, session.pk),
        ending=request.final_release(session, control),
    )
    run = serving().submit(
        state if state is not None else prefill(session, relay),
        RunRequest(
            relay,
            control,
            max_new_tokens=session.max_new_tokens,
            live_attention=live_mode(),
            stop_strings=request.stop_strings(session),
            floor=request.delivery_floor(session),
        ),
    )
    with _relays_lock:
        _relays[session.pk] = relay
    relay.follow(run, done=lambda: _forget(session.pk, relay, control))


_relays: dict[int, Relay] = {}  # relays still writing, by session
_relays_lock = threading.Lock()


def _forget(session_id: int, relay: Relay, control: RedisControl) -> None:
    control.close()
    with _relays_lock:
        if _relays.get(session_id) is relay:
            del _relays[session_id]


def prefill(session: ReviewSession, relay: Relay) -> Callable[[Backend], DecodeState]:
    """A new session's state, made in the loop thread; the relay stores its prompt ids first."""
    prompt, system = request.prompt_of(session), session.domain.system_prompt
    decoding, specs, budget = session.decoding, session.policy_specs, session.pause_budget

    def make(engine: Backend) -> DecodeState:
        state = engine.start(prompt, decoding, specs, system=system, budget=budget or None)
        state.policies.mute(session.muted_policies)
        relay.started(state)
        return state

    return make


def wait_for_previous_segment(session_id: int) -> None:
    """Work on a session starts once its previous segment has reported its stop and kept
    its paused state (as when one segment ran after the other in one thread)."""
    with _relays_lock:
        relay = _relays.get(session_id)
    if relay is not None:
        relay.join()


def tell_pending_note(session: ReviewSession, state: DecodeState) -> None:
    """Give the model the note services left for this segment (the time, after a long
    pause) as context, and save the record so a rebuild puts it back in the same place."""
    if not session.pending_note:
        return
    try:
        note = engine().add_note(state, session.pending_note)
    except UnsupportedFeature as exc:
        log.warning("session %s: the time is not told: %s", session.pk, exc)
        lifecycle.record_note_refused(session, str(exc))
        return
    save_record(session, state)
    lifecycle.record_note(session, note.text, note.at)


def live_mode() -> str | None:
    """Stream each token's attention (mean over layers and heads) where the model allows it."""
    if LIVE_ATTENTION not in engine().features:
        return None
    return "mean" if engine().runner.live_attention_supported else None


def finish_segment(
    session: ReviewSession,
    state: DecodeState,
    stop: StopInfo,
    control: RedisControl,
    halted_at: float | None = None,
    notice: PauseNotice | None = None,
    halt_timing: dict[str, float] | None = None,
    stored: record.StoredRecord | None = None,
) -> str:
    """Report what the engine did; services decide what it means for the session. A pause is
    reported at once; its details follow (keep_paused). ``stored``: the record the relay
    wrote last, not written again if the state is still that (a run that ended at a
    checkpoint)."""
    reported = time.time()
    cut = request.cut_stop_string(session, state, engine()) if stop.reason == "stop" else None
    save_record(session, state, stored)
    report = stop_report(state, stop, control, halted_at, notice, cut)
    if report.requested_at is not None:
        stamps = {**control.stamps, **(halt_timing or {}), "reported": reported}
        report = dataclasses.replace(report, stamps=stamps)
    outcome = lifecycle.record_stop(session, report)
    if outcome == "pause":
        keep_paused(session, state)
    else:
        drop_state(session.pk)
    return outcome


def stop_report(
    state: DecodeState,
    stop: StopInfo,
    control: RedisControl,
    halted_at: float | None,
    notice: PauseNotice | None = None,
    cut: dict[str, Any] | None = None,
) -> lifecycle.StopReport:
    return lifecycle.StopReport(
        cut=cut,
        halted_at=halted_at,
        reason=stop.reason,
        position=stop.position,
        pause=pause_report(state, stop, notice) if stop.reason == "pause" else None,
        requested_at=_manual_request_time(stop, control),
        cancel_waiting=lambda: control.waiting() == CANCEL,
    )


def keep_paused(session: ReviewSession, state: DecodeState, edit: int | None = None) -> None:
    """Keep the paused state in memory, where a resume or an edit finds it at once; its
    look-ahead, attention and vault snapshot are read after (reviewer/worker/details.py)."""
    states.put(session.pk, state)
    pause = latest_open_pause(session)
    if pause is None:  # approved or cancelled meanwhile
        drop_state(session.pk)
        return
    of = events.detail_of(pause.pk, edit, len(state.generated_ids))
    describer.describe(session, state, of, preview_candidates(pause.alternatives or []))


def preview_candidates(alternatives: list[dict[str, Any]]) -> list[int]:
    """The alternatives whose look-ahead the panel shows: the top ones, and any other that is
    only part of a character (Chinese, emoji), which reads as nothing until the character it
    begins is written: two such alternatives could not be told apart."""
    return [
        int(alt["token_id"])
        for rank, alt in enumerate(alternatives)
        if rank < LOOKAHEAD_BRANCHES or not alt.get("text") or REPLACEMENT in str(alt["text"])
    ]


def keep_in_vault(session: ReviewSession, snapshot: bytes) -> bool:
    """The paused state's snapshot, for any worker to take over from; False when the session
    ended meanwhile (then nothing is kept)."""
    vault.configured().put(session.pk, snapshot)
    if lifecycle.has_ended(session):  # approved or cancelled while the snapshot was written
        vault.configured().discard(session.pk)
        drop_state(session.pk)
        return False
    return True


describer = details.Describer(serving, keep_in_vault)


def drop_state(session_id: int) -> None:
    """Free what this process keeps of a session: its paused state and its details' epoch."""
    states.drop(session_id)
    describer.forget(session_id)


def _manual_request_time(stop: StopInfo, control: RedisControl) -> float | None:
    if stop.decision is None or stop.decision.kind != "manual":
        return None
    return control.requested_at


def attention_view(session_id: int, layer: int) -> None:
    """One layer's attention per head at the pause, sent to the page as an event."""
    session = lifecycle.paused_session(session_id)
    if session is None:
        return  # resumed or ended meanwhile: there is no pause to look into
    wait_for_previous_segment(session_id)  # the pause's state is kept in memory first
    state = load_state(session)
    view = engine().attention(state, layer)
    lifecycle.record_attention(
        session, events.attention(view.layer, view.heads, len(state.generated_ids))
    )


# --- where the state comes from --------------------------------------------------------------


def load_state(session: ReviewSession) -> DecodeState:
    if not session.prompt_ids:
        return start_state(session)
    ids = record.recovered_ids(session)
    state = states.get(session.pk)
    if state is not None and state.generated_ids == ids:
        return state
    state = _from_vault(session, ids)
    if state is not None:
        return state
    log.info("session %s: rebuilding its state from %d token ids", session.pk, len(ids))
    return rebuild_state(session, ids)


def start_state(session: ReviewSession) -> DecodeState:
    state = engine().start(
        request.prompt_of(session),
        session.decoding,
        session.policy_specs,
        system=session.domain.system_prompt,
        budget=session.pause_budget or None,
    )
    lifecycle.record_prompt(session, state.prompt_ids)
    return state


def _from_vault(session: ReviewSession, ids: list[int]) -> DecodeState | None:
    try:
        data = vault.configured().get(session.pk)
        state = engine().restore(data) if data is not None else None
    except (VaultError, SnapshotError) as exc:
        log.warning("session %s: vault snapshot refused (%s)", session.pk, exc)
        return None
    return state if state is not None and state.generated_ids == ids else None


def rebuild_state(session: ReviewSession, ids: list[int]) -> DecodeState:
    return engine().rebuild(record.checkpoint_of(session, ids))


# --- edits ---------------------------------------------------------------------------------


def apply_pending_edits(session: ReviewSession, state: DecodeState) -> int | None:
    """Apply the edits waiting, in order; the id of the last one applied. Each is reported
    with the new next token's alternatives; its look-ahead and attention follow (details)."""
    applied = None
    for pending in lifecycle.pending_edits(session):
        try:
            result = apply_edit(state, pending)
        except (EditError, ValueError) as exc:
            lifecycle.record_edit_refused(session, pending, refusal(exc))
            continue
        report = events.edit_report(
            result,
            engine().signals(state).alternatives,
            state.detok.pieces(result.token_start),
            state.top1_history,
            state.entropy_history,
            state.similarity_history,
        )
        with transaction.atomic():  # readers see the new ids and the edit together
            if lifecycle.ended_meanwhile(session):  # cancelled or decided: its text stands
                template = "The session ended before this edit was applied; it was not applied"
                lifecycle.record_edit_refused(session, pending, Message(template))
                continue
            save_record(session, state)
            lifecycle.record_edit_applied(session, pending, report)
        applied = pending.pk
    return applied


def refusal(exc: Exception) -> str:
    """Why an edit was refused: the engine's Message (the reviewer's page translates it),
    else the error's own text."""
    given = exc.args[0] if len(exc.args) == 1 else None
    return given if isinstance(given, Message) else str(exc)


def apply_edit(state: DecodeState, edit: Edit) -> EditResult:
    if edit.kind == "replace":
        start, end = _given(edit, edit.start, "start"), _given(edit, edit.end, "end")
        if state.text[start:end] != edit.text_before:
            template = "The text changed since this edit was made; select the span again"
            raise EditError(Message(template))
        return engine().replace_text(state, start, end, edit.text_after)
    if edit.kind == "choose":
        return engine().choose_alternative(state, _given(edit, edit.token_id, "token_id"))
    if edit.kind == "truncate":
        return engine().truncate(state, _given(edit, edit.start, "start"))
    if edit.kind == "append":
        return engine().append_text(state, edit.text_after)
    raise EditError(Message('Unknown edit kind "%(kind)s"', kind=edit.kind))


def _given(edit: Edit, value: int | None, name: str) -> int:
    """A column the edit's kind needs (the lifecycle always stores it)."""
    if value is None:
        template = "The %(kind)s edit %(edit)s has no %(field)s"
        raise EditError(Message(template, kind=edit.kind, edit=edit.pk, field=name))
    return value


# --- reporting -----------------------------------------------------------------------------


def save_record(
    session: ReviewSession, state: DecodeState, stored: record.StoredRecord | None = None
) -> None:
    current = record.stored_record(state)
    if current != stored:
        lifecycle.store_record(session, current)


def pause_report(
    state: DecodeState, stop: StopInfo, notice: PauseNotice | None = None
) -> events.PauseReport:
    """What the page shows at once: the engine's notice carries the next token's
    distribution."""
    return events.pause_report(
        stop,
        next_signals(state, notice),
        {},  # the attention follows (details)
        state.text,
        state.top1_history,
        state.entropy_history,
    )


def next_signals(state: DecodeState, notice: PauseNotice | None) -> Signals:
    if notice is not None and notice.signals is not None:
        return notice.signals
    return engine().signals(state)
