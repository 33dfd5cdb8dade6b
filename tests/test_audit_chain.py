"""The audit chain's appends: each record links to the one before it, a transaction that
appended already neither locks nor reads the head again, a rolled-back savepoint never leaves
a record linked to one that is gone, and writers appending at once keep one chain."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.db.models import ProtectedError
from django.test.utils import CaptureQueriesContext

from reviewer.lifecycle import audit
from reviewer.models import AuditRecord, ReviewSession
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)


def statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"].split()[0].upper() for q in captured.captured_queries]


def test_it_links_each_record_to_the_one_before(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    first = audit.append("start", "alice", session)
    second = audit.append("pause", "engine", session, {"position": 3})
    assert second.prev_hash == first.hash
    assert audit.first_broken_record() is None


def test_it_locks_and_reads_the_head_once_a_transaction(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    audit.append("start", "alice", session)
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        first = audit.append("generated", "engine", session)
        taken = len(captured.captured_queries)
        second = audit.append("approve", "system", session)
    assert taken == 4  # the session row, the chain's lock, the head, the record
    assert statements(captured)[taken:] == ["INSERT"]  # no savepoint, lock or read
    assert second.prev_hash == first.hash and audit.first_broken_record() is None


def test_it_locks_another_sessions_row_before_appending_for_it(alice):
    one, two = (make_session(alice, status=ReviewSession.RUNNING) for _ in range(2))
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        audit.append("start", "alice", one)
        taken = len(captured.captured_queries)
        audit.append("start", "alice", two)
    locked = captured.captured_queries[taken]["sql"]
    assert "FOR NO KEY UPDATE" in locked and str(two.pk) in locked
    assert audit.first_broken_record() is None


def test_it_never_links_to_a_record_a_savepoint_took_back(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    with transaction.atomic():
        kept = audit.append("start", "alice", session)
        with pytest.raises(RuntimeError), transaction.atomic():
            audit.append("edit", "alice", session)
            raise RuntimeError("the edit failed")
        after = audit.append("resume", "alice", session)
    assert after.prev_hash == kept.hash
    assert [r.action for r in AuditRecord.objects.order_by("id")] == ["start", "resume"]
    assert audit.first_broken_record() is None


def test_it_reads_the_head_again_after_a_rolled_back_transaction(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    kept = audit.append("start", "alice", session)
    with pytest.raises(RuntimeError), transaction.atomic():
        audit.append("edit", "alice", session)
        raise RuntimeError("the command failed")
    after = audit.append("resume", "alice", session)
    assert after.prev_hash == kept.hash and audit.first_broken_record() is None


def test_it_keeps_one_chain_when_threads_append_at_once(alice):
    sessions = [make_session(alice, status=ReviewSession.RUNNING) for _ in range(4)]
    barrier, errors = threading.Barrier(len(sessions)), []

    def end(session: ReviewSession) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                with transaction.atomic():
                    audit.append("generated", "engine", session)
                    audit.append("approve", "system", session)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert AuditRecord.objects.count() == 40
    assert audit.first_broken_record() is None
    actions = [r.action for r in AuditRecord.objects.order_by("id")]
    assert actions == ["generated", "approve"] * 20  # each transaction's pair stays together


# Numbers a JSON column changes on the way back: a certain token's entropy is -0.0, and JSON
# writes a float from 1e16 up with an exponent, which PostgreSQL gives back as an integer.
AWKWARD = [-0.0, 0.0, 1e16, 1.5e16, -1e20, 1e300, 1.5e-07, 1e-300, 123.456, 2**63, -7, "1e+16"]


def test_it_verifies_records_whose_numbers_the_database_rewrites(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    record = audit.append(
        "flagged", "engine", session, {"evidence": {"entropy": -0.0}, "v": AWKWARD}
    )
    stored = AuditRecord.objects.get(pk=record.pk).payload
    assert stored == audit.as_stored({"evidence": {"entropy": -0.0}, "v": AWKWARD})
    assert repr(stored["v"]) == repr(audit.as_stored(AWKWARD))  # ints stay ints, 0.0 is 0.0
    assert audit.first_broken_record() is None


def test_it_still_finds_a_changed_number(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    record = audit.append("flagged", "engine", session, {"entropy": 1e16})
    AuditRecord.objects.filter(pk=record.pk).update(payload={"entropy": 1e16 + 2})
    assert audit.first_broken_record()[0].pk == record.pk


def test_it_refuses_to_delete_a_session_that_has_records(alice):
    # Each record's hash covers its session's id: clearing the link would break the chain.
    session = make_session(alice)
    audit.append("pause", "alice", session)
    with pytest.raises(ProtectedError):
        session.delete()
    assert ReviewSession.objects.filter(pk=session.pk).exists()
    assert audit.first_broken_record() is None
