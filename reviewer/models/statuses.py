"""The lifecycle of a review session: every status and the transitions allowed between them.

This is the one table: services refuse a transition it does not list, and the status groups
the services, the views, the API description and the page read are derived from it. Plain
data (strings, tuples, dicts), so the page's generated protocol module can carry it as is.

    draft -> running -> paused -> running ... -> generated -> completed | rejected
    generated -> paused: an edit or a rollback of the generated text reopens it at its end
    a paused session may be decided at once; any status not final -> cancelled | failed;
    failed -> running (resume rebuilds it from its stored token ids)

A plain table rather than django-fsm-2: the transitions are written from three places
(commands, worker reports, failures), each already inside a locked transaction, and one
check in ``reviewer.lifecycle.transitions.set_status`` is all that needs; the groups below are read by code that
never changes a status (views, the API schema, the page), which a decorator on model
methods would not give them.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

DRAFT, RUNNING, PAUSED, GENERATED = "draft", "running", "paused", "generated"
COMPLETED, REJECTED, CANCELLED, FAILED = "completed", "rejected", "cancelled", "failed"

STATUSES = (DRAFT, RUNNING, PAUSED, GENERATED, COMPLETED, REJECTED, CANCELLED, FAILED)

# What the admin calls each status: English here, translated where it is shown
# (reviewer.models.session); the reviewer's pages have their own (reviewer.web.ui_text).
LABELS = {
    DRAFT: gettext_noop("draft"),
    RUNNING: gettext_noop("running"),
    PAUSED: gettext_noop("paused"),
    GENERATED: gettext_noop("generated, awaiting decision"),
    COMPLETED: gettext_noop("completed"),
    REJECTED: gettext_noop("rejected"),
    CANCELLED: gettext_noop("cancelled"),
    FAILED: gettext_noop("failed"),
}

TRANSITIONS: dict[str, tuple[str, ...]] = {
    DRAFT: (RUNNING, CANCELLED, FAILED),
    RUNNING: (PAUSED, GENERATED, CANCELLED, FAILED),
    PAUSED: (RUNNING, COMPLETED, REJECTED, CANCELLED, FAILED),
    GENERATED: (PAUSED, COMPLETED, REJECTED, CANCELLED, FAILED),  # paused: reopened to correct
    FAILED: (RUNNING,),
    COMPLETED: (),
    REJECTED: (),
    CANCELLED: (),
}


def allows(current: str, new: str) -> bool:
    return new in TRANSITIONS.get(current, ())


def _leading_to(status: str) -> frozenset[str]:
    return frozenset(s for s in STATUSES if status in TRANSITIONS[s])


def _reaching(status: str) -> frozenset[str]:
    """The statuses from which ``status`` can still be reached, in any number of steps."""
    found = {status}
    while more := {s for s in STATUSES if s not in found and set(TRANSITIONS[s]) & found}:
        found |= more
    return frozenset(found)


# The groups. Ended: nothing generates and no worker holds it (a failed session can only be
# resumed by a reviewer, which starts it afresh from its stored token ids).
FINAL = frozenset({COMPLETED, REJECTED, CANCELLED, FAILED})
LIVE = frozenset({RUNNING, PAUSED})  # a worker holds or runs the state
WAITING = frozenset({PAUSED, GENERATED})  # waits for a reviewer (claimable on the floor)
DECIDABLE = _leading_to(COMPLETED)  # approve / reject
RESUMABLE = _leading_to(RUNNING) - {DRAFT}  # a draft starts, it does not resume
CANCELLABLE = _leading_to(CANCELLED)
# The session can still generate: the page keeps its pause and resume controls (hidden while
# they do nothing: a generated text runs again once an edit reopens it).
MAY_RUN = _reaching(RUNNING)

GROUPS: dict[str, tuple[str, ...]] = {
    name: tuple(s for s in STATUSES if s in group)
    for name, group in {
        "FINAL": FINAL,
        "LIVE": LIVE,
        "WAITING": WAITING,
        "DECIDABLE": DECIDABLE,
        "RESUMABLE": RESUMABLE,
        "CANCELLABLE": CANCELLABLE,
        "MAY_RUN": MAY_RUN,
    }.items()
}
