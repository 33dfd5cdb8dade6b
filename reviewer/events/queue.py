"""The live queue: whenever a gateway (ownerless) session changes status or claim, a small
``queue`` message goes to its domain's group, where every open queue page of that domain's
reviewers listens (reviewer/web/queue_consumer.py); a reviewer's own session's changes go to
that reviewer's group alone. Unlike session events these are
not stored or numbered: the page reads the item itself on each one, so a lost message costs
only freshness, and a reconnecting page reloads the queue."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypedDict

from channels.layers import get_channel_layer

from reviewer.events import layer_loop
from reviewer.events.commit_batch import CommitBatch
from reviewer.web.health import group_namespace

if TYPE_CHECKING:
    from reviewer.models import ReviewSession

log = logging.getLogger(__name__)

QUEUE = "queue"  # the message's type on the queue socket


class QueueMessage(TypedDict):
    """What changed, enough for a page to decide whether to read the item again."""

    type: str  # always "queue"
    session: int
    domain: int
    owner: int | None  # a reviewer's own session: only their pages hear of it
    status: str
    claimed_by: str | None
    action: str  # "status", or the claim's audit action (claim, renew, release, ...)


def group_name(domain_id: int) -> str:
    """The channel-layer group of a domain's queue (the namespace keeps installations
    sharing one Redis apart, as for session groups)."""
    return f"queue-{group_namespace()}-{domain_id}"


def owner_group_name(user_id: int) -> str:
    """The group of one reviewer's queue pages, for the sessions they own."""
    return f"queue-{group_namespace()}-user-{user_id}"


def announce(session: ReviewSession, action: str) -> None:
    """Tell the queue pages that list the session, once the surrounding transaction commits:
    the domain's for a session on the floor; its owner's for a reviewer's own session."""
    from reviewer.lifecycle.claims import holder  # claims imports the event modules

    current = holder(session)
    message: QueueMessage = {
        "type": QUEUE,
        "session": session.pk,
        "domain": session.domain_id,
        "owner": session.owner_id,
        "status": session.status,
        "claimed_by": current.username if current is not None else None,
        "action": action,
    }
    _announced.add([message])


def send_latest(messages: list[QueueMessage]) -> None:
    """A transaction's announcements: the last of each session's, as it stands at the
    commit (a generation's end with the system's approval: completed, not generated first)."""
    latest = {message["session"]: message for message in messages}
    for message in latest.values():
        send(message)


# Looked up when sent (tests replace send).
_announced: CommitBatch[QueueMessage] = CommitBatch(lambda messages: send_latest(messages))


def send(message: QueueMessage) -> None:
    """Best effort, like session events: a page that missed one is stale until its next
    message or reload, and nothing a reviewer or worker did fails because Redis is away. Sent
    from this thread's own event loop, as session events are (reviewer/events/layer_loop.py):
    ``async_to_sync`` would start a thread, a loop and a Redis connection for each message."""
    layer = get_channel_layer()
    try:
        if layer is None:
            raise RuntimeError("no channel layer is configured")
        owner = message.get("owner")
        group = owner_group_name(owner) if owner is not None else group_name(message["domain"])
        layer_loop.run(layer.group_send(group, {"type": "queue.event", "event": dict(message)}))
    except Exception as exc:
        log.warning("queue message not sent (%s: %s)", type(exc).__name__, exc)
