"""A segment task whose segment is no longer the session's (superseded, or the session ended)
is ignored as stale: it neither waits for the segment that runs nor makes the details of the
session's pause stale."""

from __future__ import annotations

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
