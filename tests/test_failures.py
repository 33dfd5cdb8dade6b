"""A failed session says what happened in a sentence; exception types stay in the log."""

from __future__ import annotations

import pytest
import redis
from django.db import OperationalError
from django.utils import translation

from inference.backend import UnsupportedFeature
from inference.message import Message
from reviewer import lifecycle
from reviewer.analytics import timeline
from reviewer.documents import redline
from reviewer.models import AuditRecord, ReviewSession
from reviewer.web import ui_text
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
    assert record.payload == {
        "error": failures.UNEXPECTED,
        "message": {"template": failures.UNEXPECTED, "values": {}},
    }


def fail_with(session, exc: BaseException) -> None:
    """The worker's segment raises ``exc``: the task fails the session as it does live."""

    def broken(*args, **kwargs):
        raise exc

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "run_segment", broken)
        with pytest.raises(type(exc)):
            tasks.run_segment.apply(args=(session.pk, session.segment), throw=True)
    session.refresh_from_db()


@pytest.mark.model  # the session page reads the tokenizer
@pytest.mark.django_db
def test_it_shows_why_a_session_failed_in_the_readers_language(alice, client):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    fail_with(session, OperationalError("server closed the connection unexpectedly"))
    assert session.error == "The database could not be reached from the worker."
    assert session.error_message == {"template": session.error, "values": {}}
    client.force_login(alice)
    url = f"/sessions/{session.pk}/"
    chinese = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "工作进程无法连接数据库。" in chinese and session.error not in chinese
    assert session.error in client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    with translation.override("zh-hans"):
        assert "工作进程无法连接数据库。" in redline.decision(session)["text"]
    # The API and the gateway speak English to programs.
    assert client.get(f"/api/sessions/{session.pk}").json()["error"] == session.error


@pytest.mark.django_db
def test_it_keeps_an_engine_refusals_values_for_the_reader(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    grace = Message(
        "Redis was out of reach for more than %(seconds)s s (CAESURA_REDIS_GRACE_S)", seconds=30
    )
    fail_with(session, RedisUnavailable(grace))
    assert session.error == "Redis was out of reach for more than 30 s (CAESURA_REDIS_GRACE_S)"
    with translation.override("zh-hans"):
        assert (
            ui_text.session_error(session) == "Redis 已超过 30 秒无法连接（CAESURA_REDIS_GRACE_S）"
        )


@pytest.mark.django_db
def test_it_forgets_the_failure_when_the_session_resumes(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    fail_with(session, KeyError("tokens"))
    assert session.error_message["template"] == failures.UNEXPECTED
    lifecycle.resume(alice, session.pk)
    session.refresh_from_db()
    assert (session.status, session.error, session.error_message) == (ReviewSession.RUNNING, "", {})


@pytest.mark.django_db
def test_it_tells_the_failure_in_the_timeline_in_the_readers_language(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="seg-1")
    fail_with(session, OperationalError("server closed the connection unexpectedly"))
    with translation.override("zh-hans"):
        [failed] = [e for e in timeline.timeline(session) if e["kind"] == "failed"]
    assert failed["detail"] == "工作进程无法连接数据库。"
