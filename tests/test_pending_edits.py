"""Offsets and alternatives refer to the text as it is: while an edit waits for the worker,
commands that depend on the text are refused, and nothing changes."""

import pytest

from reviewer import lifecycle
from reviewer.models import AuditRecord, Edit

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "command, args",
    [
        (lifecycle.edit, (0, 3, "A")),
        (lifecycle.choose, (42,)),
        (lifecycle.rollback, (2,)),
        (lifecycle.approve, ()),
        (lifecycle.reject, ("no",)),
    ],
)
def test_it_refuses_text_commands_while_an_edit_is_pending(
    alice, paused_with_pending_edit, command, args
):
    before = (AuditRecord.objects.count(), Edit.objects.count())
    with pytest.raises(lifecycle.Conflict, match="still being applied"):
        command(alice, paused_with_pending_edit.pk, *args)
    assert (AuditRecord.objects.count(), Edit.objects.count()) == before
    paused_with_pending_edit.refresh_from_db()
    assert paused_with_pending_edit.status == "paused"


def test_it_still_resumes_and_the_worker_applies_the_edit_first(alice, paused_with_pending_edit):
    assert lifecycle.resume(alice, paused_with_pending_edit.pk)["status"] == "running"


def test_it_accepts_the_next_edit_once_the_first_was_applied(alice, paused_with_pending_edit):
    Edit.objects.filter(session=paused_with_pending_edit).update(applied=True)
    assert "edit" in lifecycle.edit(alice, paused_with_pending_edit.pk, 0, 3, "A")
