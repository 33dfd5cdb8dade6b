"""Every transition of a review session, in one place.

    draft -> running -> paused -> running ... -> generated -> completed | rejected
                  any live state -> cancelled | failed;  failed -> running (resume)

``review``: what a reviewer asks (start, pause, resume, edit, choose, attention, rollback,
approve, reject, cancel). ``reports``: what a worker reports, and what follows from it.
``transitions``: the states, errors and hand-over to workers both share; ``inputs`` and
``idempotency`` read a command's arguments and run it once per command id. Work reaches the
workers through ``reviewer.dispatch``, by task name: nothing here imports the worker.
"""

from reviewer.arguments import CommandError, InvalidInput
from reviewer.services.reports import (
    StopReport,
    begin_segment,
    checkpoint,
    generates,
    has_ended,
    orphaned_sessions,
    paused_session,
    pending_edits,
    record_attention,
    record_attention_failed,
    record_edit_applied,
    record_edit_refused,
    record_failure,
    record_flag,
    record_generated,
    record_pause,
    record_prompt,
    record_rollback,
    record_stop,
    record_token,
    redispatch,
    workers_with_live_sessions,
)
from reviewer.services.review import (
    approve,
    attention,
    cancel,
    choose,
    edit,
    pause,
    reject,
    resume,
    rollback,
    start_session,
    summary,
)
from reviewer.services.transitions import (
    DECIDABLE,
    LIVE,
    QUEUE_UNREACHABLE,
    RESUMABLE,
    Conflict,
    NotFound,
    SegmentSuperseded,
    Unavailable,
    get_session_for,
)

__all__ = [
    "DECIDABLE",
    "LIVE",
    "QUEUE_UNREACHABLE",
    "RESUMABLE",
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
    "checkpoint",
    "choose",
    "edit",
    "generates",
    "get_session_for",
    "has_ended",
    "orphaned_sessions",
    "pause",
    "paused_session",
    "pending_edits",
    "record_attention",
    "record_attention_failed",
    "record_edit_applied",
    "record_edit_refused",
    "record_failure",
    "record_flag",
    "record_generated",
    "record_pause",
    "record_prompt",
    "record_rollback",
    "record_stop",
    "record_token",
    "redispatch",
    "reject",
    "resume",
    "rollback",
    "start_session",
    "summary",
    "workers_with_live_sessions",
]
