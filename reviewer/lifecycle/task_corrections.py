"""A reviewer's correction of a session's task type: a label for the classifier's live
accuracy (reviewer/analytics/task_watch.py) and for its retraining
(reviewer/analytics/task_models.py). It changes no decoding: the session ran with the preset
its first label chose, and the page says both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reviewer.lifecycle import audit, claims
from reviewer.lifecycle.idempotency import idempotent
from reviewer.lifecycle.transitions import S, command_on
from reviewer.models import TaskCorrection, statuses
from reviewer.web import arguments

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Any session that has an input: a draft has not been labelled yet.
CORRECTABLE = frozenset(statuses.STATUSES) - {statuses.DRAFT}


@idempotent("correct_task")
def correct_task(user: User, session_id: Any, task_type: Any) -> dict[str, Any]:
    """Record the task type the reviewer says the session's input is (audited). A correction
    to the label the session already has confirms it; a second correction replaces the first."""
    label = arguments.CORRECTED_TASK_TYPE(task_type)
    command = "correct the task type of"
    with command_on(user, session_id, CORRECTABLE, command, needs_claim=False) as session:
        if not session.is_final:  # a live generation from the floor is its holder's to judge
            claims.require_claim(session, user, command)
        before = TaskCorrection.objects.filter(session=session).first()
        correction, _ = TaskCorrection.objects.update_or_create(
            session=session,
            defaults={
                "given": session.task_type,
                "corrected": label,
                "corrected_by": user.username,
            },
        )
        payload = {"given": session.task_type, "source": session.task_source, "corrected": label}
        if before is not None:
            payload["replaces"] = before.corrected
        audit.append("task_corrected", user.username, session, payload)
    return {"id": session.pk, "status": session.status, **correction_data(correction)}


def correction_data(correction: TaskCorrection | None) -> dict[str, Any]:
    """What the page and the API show of a session's correction (empty without one)."""
    if correction is None:
        return {"task_correction": None}
    return {
        "task_correction": {
            "given": correction.given,
            "corrected": correction.corrected,
            "corrected_by": correction.corrected_by,
            "at": correction.updated_at.isoformat(),
        }
    }


def correction_of(session: S) -> TaskCorrection | None:
    return TaskCorrection.objects.filter(session=session).first()
