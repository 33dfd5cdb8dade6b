"""What a reviewer reads when a worker could not go on with a session.

The session keeps a sentence; the exception's type and traceback go to the worker's log.
Caesura's own errors (engine refusals, a Redis outage past its grace) already speak to the
reviewer, so their message is kept as it is; anything else gets one plain sentence. Each is
a Message, so that the session page shows it in the reader's language.
"""

from __future__ import annotations

from django.db import DatabaseError

from inference.message import Message
from reviewer.worker.pause_flags import OUTAGE, RedisUnavailable

# ValueError: the engine's refusals (a context that does not fit, an unsupported feature,
# a snapshot it cannot restore, sampling values) all derive from it.
SPEAKING = (ValueError, RedisUnavailable)

DATABASE = Message("The database could not be reached from the worker.")
REDIS = Message("Redis could not be reached from the worker.")
UNEXPECTED = Message("An unexpected error in the worker; the details are in its log.")


def describe(exc: BaseException) -> str:
    """The sentence a failed session shows for ``exc``: the exception's own Message where it
    carries one."""
    text = str(exc).strip()
    if isinstance(exc, SPEAKING) and text:
        said = exc.args[0] if len(exc.args) == 1 else None
        return said if isinstance(said, Message) else text
    if isinstance(exc, DatabaseError):
        return DATABASE
    if isinstance(exc, OUTAGE):
        return REDIS
    return UNEXPECTED
