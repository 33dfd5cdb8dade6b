"""What a request could have changed, in one comparable value: a refused one changes nothing."""

from __future__ import annotations

from reviewer.models import (
    ApiToken,
    AuditRecord,
    CommandReceipt,
    Edit,
    PauseEvent,
    ReviewSession,
    SessionEvent,
)


def snapshot(session_id: int | None = None) -> dict:
    """Everything, or (``session_id``) one session with what hangs off it."""
    of = {} if session_id is None else {"session_id": session_id}
    sessions = ReviewSession.objects.filter(**({} if session_id is None else {"pk": session_id}))
    return {
        "sessions": list(
            sessions.order_by("pk").values_list(
                "pk",
                "status",
                "text",
                "decision_comment",
                "segment",
                "last_seq",
                "finished_at",
                "decoding",
            )
        ),
        "pauses": list(
            PauseEvent.objects.filter(**of)
            .order_by("pk")
            .values_list("pk", "outcome", "resumed_at")
        ),
        "edits": list(
            Edit.objects.filter(**of).order_by("pk").values_list("pk", "kind", "text_after")
        ),
        "audit": list(AuditRecord.objects.filter(**of).order_by("pk").values_list("pk", "action")),
        "receipts": list(CommandReceipt.objects.order_by("pk").values_list("pk", "command_id")),
        "events": list(SessionEvent.objects.filter(**of).order_by("pk").values_list("pk", "type")),
        "tokens": list(ApiToken.objects.order_by("pk").values_list("pk", "key")),
    }
