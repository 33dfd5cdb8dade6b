"""Every transition of a review session, in one place.

    The statuses and the transitions allowed between them: reviewer/models/statuses.py.

``review``: what a reviewer asks (start, pause, resume, edit, choose, attention, rollback,
mute, unmute, approve, reject, cancel); ``task_corrections``: a reviewer's word on the task
type. ``reports``: what a worker reports, and what follows from it.
``transitions``: the states, errors and hand-over to workers both share; ``inputs`` and
``idempotency`` read a command's arguments and run it once per command id. Work reaches the
workers through ``reviewer.worker.dispatch``, by task name: nothing here imports the worker.
"""

from reviewer.lifecycle.claims import claim, expire_lapsed, reassign, release
from reviewer.lifecycle.reports import (
    StopReport,
    begin_segment,
    generates,
    has_ended,
    orphaned_sessions,
    paused_session,
    pending_edits,
    record_attention,
    record_attention_failed,
    record_edit_applied,
    record_edit_refused,
    record_flag,
    record_generated,
    record_note,
    record_note_refused,
    record_pause,
    record_pause_detail,
    record_prompt,
    record_rollback,
    record_stop,
    record_token,
    redispatch,
    store_record,
    workers_with_live_sessions,
)
from reviewer.lifecycle.review import (
    approve,
    attention,
    cancel,
    choose,
    edit,
    mute,
    pause,
    reject,
    resume,
    rollback,
    start_session,
    summary,
    unmute,
)
from reviewer.lifecycle.task_corrections import correct_task
from reviewer.lifecycle.transitions import (
    QUEUE_UNREACHABLE,
    Conflict,
    NotFound,
    SegmentSuperseded,
    Unavailable,
    fail,
    get_session_for,
)
from reviewer.web.arguments import CommandError, InvalidInput

__all__ = [
    "QUEUE_UNREACHABLE",
    "CommandError",
    "Conflict",
    "InvalidInput",
    "NotFound",
    "SegmentSuperseded",
    "StopReport",
    "Unavailable",
    "approve",
    "attention",
    "begin_segment",
    "cancel",
    "choose",
    "claim",
    "correct_task",
    "expire_lapsed",
    "edit",
    "fail",
    "generates",
    "get_session_for",
    "mute",
    "has_ended",
    "orphaned_sessions",
    "pause",
    "paused_session",
    "pending_edits",
    "record_attention",
    "record_attention_failed",
    "record_edit_applied",
    "record_edit_refused",
    "record_flag",
    "record_generated",
    "record_note",
    "record_note_refused",
    "record_pause",
    "record_pause_detail",
    "record_prompt",
    "record_rollback",
    "record_stop",
    "record_token",
    "redispatch",
    "reassign",
    "reject",
    "release",
    "resume",
    "rollback",
    "start_session",
    "store_record",
    "summary",
    "unmute",
    "workers_with_live_sessions",
]
