"""Who counts as alive, what a dead worker's sessions become, and what a Redis outage does to
a segment: the parts of fault recovery that need no worker process."""

from __future__ import annotations

import time

import pytest
import redis
from django.db import DatabaseError, OperationalError, connection, connections
from django.test import Client

from reviewer import events, lifecycle
from reviewer.models import AuditRecord, Edit, ReviewSession
from reviewer.worker import liveness, pause_flags
from tests.conftest import free_port, wait_for
from tests.session_factory import make_session, stub_worker

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def holder(monkeypatch):
    """This test process as a worker holding its liveness lock; released afterwards."""
    monkeypatch.setattr(liveness, "_holder", None)
    yield
    if liveness._holder is not None:
        liveness._holder.close()


@pytest.fixture
def dispatched(monkeypatch) -> list[tuple]:
    """Redispatches sent to the shared queue, without a broker."""
    from reviewer.worker import dispatch

    sent: list[tuple] = []
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: sent.append(args))
    return sent


def test_it_counts_a_worker_alive_exactly_while_its_lock_is_held(holder):
    me = liveness.identity("w@host")
    assert me not in liveness.alive()
    liveness.hold("w@host")
    assert me in liveness.alive()
    liveness._holder.close()  # what the death of the process does to its connection
    wait_for(lambda: me not in liveness.alive(), timeout=2, what="the lock to go")


def test_it_counts_a_previous_incarnation_under_the_same_name_as_dead(holder, monkeypatch):
    before = liveness.identity("w@host")
    monkeypatch.setattr(liveness, "INCARNATION", "restarted")
    liveness.hold("w@host")
    alive = liveness.alive()
    assert liveness.identity("w@host") in alive and before not in alive
    assert liveness.hostname_of(before) == "w@host"


def test_it_takes_its_lock_again_after_an_outage_longer_than_a_beat(holder, monkeypatch):
    me = liveness.identity("w@host")
    liveness.hold("w@host")
    with connection.cursor() as cursor:  # Postgres restarts: the holder's backend goes
        cursor.execute(
            "SELECT pg_terminate_backend(%s)", [liveness._holder.connection.info.backend_pid]
        )
    wait_for(lambda: me not in liveness.alive(), timeout=2, what="the lock to go")
    create = connections.create_connection

    def refused(alias):
        raise OperationalError("connection refused: the database system is starting up")

    monkeypatch.setattr(connections, "create_connection", refused)
    with pytest.raises(OperationalError):
        liveness.hold("w@host")  # the next beat, Postgres still starting
    monkeypatch.setattr(connections, "create_connection", create)
    assert liveness.hold("w@host") is True  # the beat after: Postgres is back
    assert me in liveness.alive()


def test_it_closes_a_connection_it_could_not_take_its_lock_on(holder, monkeypatch):
    made = []
    create = connections.create_connection
    monkeypatch.setattr(
        connections, "create_connection", lambda alias: made.append(create(alias)) or made[-1]
    )
    monkeypatch.setattr(liveness, "KEEPALIVE", {"no_such_setting": 1})  # Postgres refuses it
    with pytest.raises(DatabaseError):
        liveness.hold("w@host")
    assert len(made) == 1 and made[0].connection is None


def test_it_takes_back_the_sessions_a_dead_worker_left_unfinished(alice, dispatched):
    dead = "w@host#gone"
    running = make_session(alice, status=S.RUNNING, worker=dead, segment="old")
    paused = make_session(alice, worker=dead)  # nothing to do: its state is in the vault
    edited = make_session(alice, worker=dead)  # an edit went to the dead worker's own queue
    Edit.objects.create(session=edited, kind="append", text_after="!", author=alice)
    orphans = lifecycle.orphaned_sessions(liveness.alive())
    assert sorted(orphans) == [(running.pk, dead), (edited.pk, dead)]
    assert paused.pk not in dict(orphans)

    for session_id, lost in orphans:
        lifecycle.redispatch(session_id, lost)
        lifecycle.redispatch(session_id, lost)  # a second survivor saw the same death
    running.refresh_from_db()
    assert (running.worker, running.status) == ("", S.RUNNING) and running.segment != "old"
    assert sorted(dispatched) == sorted(
        [(running.pk, running.segment), (edited.pk, S.objects.get(pk=edited.pk).segment)]
    )
    assert AuditRecord.objects.filter(action="redispatched").count() == 2


def test_it_cancels_at_once_a_running_session_no_live_worker_holds(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = make_session(alice, status=S.RUNNING, worker="w@host#gone")
    lifecycle.cancel(alice, session.pk)
    session.refresh_from_db()
    assert session.status == S.CANCELLED


def test_it_leaves_the_cancel_of_a_live_worker_s_session_to_its_engine(
    alice, monkeypatch, holder, django_capture_on_commit_callbacks
):
    stub_worker(monkeypatch)
    liveness.hold("w@host")
    session = make_session(alice, status=S.RUNNING, worker=liveness.identity("w@host"))
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.cancel(alice, session.pk)
    session.refresh_from_db()
    assert session.status == S.RUNNING  # the engine stops at the next token and reports
    assert pause_flags.redis_client().get(pause_flags.control_key(session.pk)) is not None
    pause_flags.clear(session.pk)


def test_a_superseded_segment_failing_does_not_fail_the_session(alice):
    session = make_session(alice, status=S.RUNNING, segment="taken-over")
    lifecycle.fail(session.pk, "OperationalError: server closed the connection", "old")
    session.refresh_from_db()
    assert session.status == S.RUNNING
    lifecycle.fail(session.pk, "RuntimeError: boom", "taken-over")
    session.refresh_from_db()
    assert (session.status, session.error) == (S.FAILED, "RuntimeError: boom")


# --- a failed session resumes ----------------------------------------------------------------


def failed_session(alice) -> ReviewSession:
    session = make_session(alice, status=S.FAILED, error="RedisUnavailable: out of reach")
    S.objects.filter(pk=session.pk).update(finished_at=session.created_at)
    return session


def test_it_resumes_a_failed_session_through_the_api(alice, monkeypatch):
    dispatched = stub_worker(monkeypatch)
    session = make_session(alice, status=S.RUNNING)
    lifecycle.fail(session.pk, "RedisUnavailable: out of reach")
    client = Client()
    client.force_login(alice)
    response = client.post(f"/api/sessions/{session.pk}/resume", content_type="application/json")
    assert response.status_code == 200, response.content
    session.refresh_from_db()
    assert (session.status, session.error, session.finished_at) == (S.RUNNING, "", None)
    assert session.generated_ids == [11, 12, 13, 14, 15]  # continued from the stored ids
    assert dispatched == [session.pk]
    record = AuditRecord.objects.filter(session=session, action="resume").get()
    assert record.payload == {"failed_with": "RedisUnavailable: out of reach"}
    assert session.events.filter(type="resumed").get().payload == {"position": 5}


def test_it_still_refuses_to_resume_a_cancelled_session(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = make_session(alice, status=S.CANCELLED)
    with pytest.raises(lifecycle.Conflict, match="cancelled"):
        lifecycle.resume(alice, session.pk)


@pytest.mark.model  # the ASGI application, imported first here, loads the model's tokenizer
@pytest.mark.django_db(transaction=True)
async def test_it_resumes_a_failed_session_over_the_websocket(alice, monkeypatch):
    from channels.db import database_sync_to_async
    from django.db import connections

    from tests.test_consumer import reply_to, socket

    stub_worker(monkeypatch)
    session = await database_sync_to_async(make_session)(alice, status=S.FAILED, error="x")
    communicator = await socket(session.pk, alice)
    await communicator.connect()
    answer = await reply_to(communicator, {"command": "resume", "command_id": "r-1"})
    assert answer["type"] == "ack", answer
    assert answer["result"]["status"] == S.RUNNING
    await communicator.disconnect()
    await database_sync_to_async(connections.close_all)()


# --- Redis out of reach ----------------------------------------------------------------------


def test_a_failed_broadcast_does_not_fail_what_emitted_the_event(alice, monkeypatch):
    session = make_session(alice, status=S.RUNNING)
    layer = events.get_channel_layer()

    async def refused(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Connection refused")

    monkeypatch.setattr(layer, "group_send", refused)
    from django.db import transaction

    with transaction.atomic():
        events.emit(session.pk, "token", {"position": 5})  # broadcast runs at commit
    events.broadcast(session.events.get())
    assert session.events.count() == 1


def test_the_control_poll_rides_out_an_outage_shorter_than_the_grace(settings, alice):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings.CAESURA_REDIS_GRACE_S = 1
    handle = pause_flags.RedisControl(make_session(alice).pk)
    assert handle.poll() is None  # the outage starts: no request, generation goes on
    handle.clear()
    assert handle.poll() is None
    time.sleep(1.1)
    with pytest.raises(pause_flags.RedisUnavailable, match="CAESURA_REDIS_GRACE_S"):
        handle.poll()
