"""A failed session says what happened in a sentence; exception types stay in the log."""

from __future__ import annotations

import pytest
import redis
from django.db import OperationalError

from inference.backend import UnsupportedFeature
from reviewer.models import AuditRecord, ReviewSession
from reviewer.worker import failures, runtime, tasks
from reviewer.worker.pause_flags import RedisUnavailable
from tests.session_factory import make_session

FITS = "5000 tokens do not fit this engine's context of 4096 (CAESURA_VLLM_MAX_MODEL_LEN)"


@pytest.mark.parametrize(
    ("exc", "shown"),
    [
        (ValueError(FITS), FITS),
        (UnsupportedFeature("live attention needs the transformers backend"),
         "live attention needs the transformers backend"),
        (RedisUnavailable("Redis is out of reach (timeout)"), "Redis is out of reach (timeout)"),
        (OperationalError("server closed the connection unexpectedly"), failures.DATABASE),
        (redis.exceptions.ConnectionError("Error 111 connecting"), failures.REDIS),
        (KeyError("tokens"), failures.UNEXPECTED),
        (ValueError(""), failures.UNEXPECTED),
        (RuntimeError("CUDA error: device-side assert"), failures.UNEXPECTED),
    ],
)  # fmt: skip
def test_it_describes_a_failure_in_words_a_reviewer_reads(exc, shown):
    assert failures.describe(exc) == shown


@pytest.mark.django_db
def test_it_fails_a_segment_with_the_sentence_and_keeps_the_type_out(alice, monkeypatch):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")

    def broken(*args, **kwargs):
        raise KeyError("tokens")

    monkeypatch.setattr(runtime, "run_segment", broken)
    with pytest.raises(KeyError):  # Celery still sees the task fail, and logs the traceback
        tasks.run_segment.apply(args=(session.pk, "seg-1"), throw=True)
    session.refresh_from_db()
    assert (session.status, session.error) == (ReviewSession.FAILED, failures.UNEXPECTED)
    assert "KeyError" not in session.error
    record = AuditRecord.objects.get(session=session, action="failed")
    assert record.payload == {"error": failures.UNEXPECTED}
