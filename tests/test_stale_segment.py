"""A segment task whose segment is no longer the session's (superseded, or the session ended)
is ignored as stale: it neither waits for the segment that runs nor makes the details of the
session's pause stale."""

from __future__ import annotations

import time

import pytest

from reviewer.models import ReviewSession
from reviewer.worker import runtime
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db
S = ReviewSession


class RunningRelay:
    """The relay of the segment that runs: the real one's join waits up to JOIN_WAIT_S."""

    def __init__(self) -> None:
        self.joined = 0

    def join(self) -> None:
        self.joined += 1


@pytest.fixture
def relay(monkeypatch):
    """Installs a running relay for a session: ``relay(session)``."""

    def install(session: ReviewSession) -> RunningRelay:
        running = RunningRelay()
        monkeypatch.setitem(runtime._relays, session.pk, running)
        return running

    return install


@pytest.mark.parametrize(
    ("status", "segment"), [(S.RUNNING, "handed-over"), (S.CANCELLED, "current")]
)
def test_it_ignores_a_stale_segment_without_waiting_or_touching_the_pause(
    alice, relay, status, segment
):
    session = make_session(alice, status=status, segment="current")
    running = relay(session)
    epoch = runtime.describer.supersede(session.pk)  # the pause the current segment reads
    assert runtime.run_segment(session.pk, segment, "w@host") == "stale"
    assert running.joined == 0 and runtime.describer.epoch(session.pk) == epoch
    session.refresh_from_db()
    assert session.worker == ""  # not claimed either


def test_a_current_segment_waits_for_the_last_one_and_makes_its_details_stale(
    alice, relay, monkeypatch
):
    session = make_session(alice, status=S.RUNNING, segment="current")  # no prompt ids: new
    running = relay(session)
    started: list[int] = []
    monkeypatch.setattr(runtime, "start_generating", lambda session, state: started.append(1))
    epoch = runtime.describer.epoch(session.pk)
    assert runtime.run_segment(session.pk, "current", "w@host") == "generating"
    assert running.joined == 1 and started == [1]
    assert runtime.describer.epoch(session.pk) != epoch


@pytest.mark.django_db(transaction=True)
def test_a_task_taken_before_its_redispatch_commits_is_not_dropped_as_stale(alice):
    """A redispatch sends its task before it commits (its row lock held): a worker quick
    enough to look first must wait for the commit, not drop the only task of the session."""
    import threading

    from django.db import connections, transaction

    session = make_session(alice, S.PAUSED, segment="before")
    locked, looked = threading.Event(), {}

    def redispatch() -> None:  # as reviewer.lifecycle.reports.redispatch does
        try:
            with transaction.atomic():
                S.objects.select_for_update().filter(pk=session.pk).update(segment="after")
                locked.set()
                time.sleep(0.5)  # the task is sent and taken here, before the commit
        finally:
            connections.close_all()

    def worker() -> None:
        try:
            locked.wait(5)
            looked["current"] = runtime.is_current(session.pk, "after")
            looked["at"] = time.monotonic()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=redispatch), threading.Thread(target=worker)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert looked["current"] is True
    assert looked["at"] - started >= 0.4  # it waited for the commit
    assert runtime.is_current(session.pk, "before") is False  # stale, once committed
