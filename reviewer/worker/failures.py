"""What a reviewer reads when a worker could not go on with a session.

The session keeps a sentence; the exception's type and traceback go to the worker's log.
Caesura's own errors (engine refusals, a Redis outage past its grace) already speak to the
reviewer, so their message is kept as it is; anything else gets one plain sentence.
"""

from __future__ import annotations

from django.db import DatabaseError

from reviewer.worker.pause_flags import OUTAGE, RedisUnavailable

# ValueError: the engine's refusals (a context that does not fit, an unsupported feature,
# a snapshot it cannot restore, sampling values) all derive from it.
SPEAKING = (ValueError, RedisUnavailable)

DATABASE = "The database could not be reached from the worker."
REDIS = "Redis could not be reached from the worker."
UNEXPECTED = "An unexpected error in the worker; the details are in its log."


def describe(exc: BaseException) -> str:
    """The sentence a failed session shows for ``exc``."""
    text = str(exc).strip()
    if isinstance(exc, SPEAKING) and text:
        return text
    if isinstance(exc, DatabaseError):
        return DATABASE
    if isinstance(exc, OUTAGE):
        return REDIS
    return UNEXPECTED
