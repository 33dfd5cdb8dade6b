"""The pause's details (reviewer/worker/details.py) over a stand-in engine: read in order,
recorded as events naming the pause, and skipped once the state moved on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from reviewer import events
from reviewer.models import SessionEvent
from reviewer.worker.details import Describer, Job, Stale
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db


@dataclass
class View:
    def to_dict(self) -> dict[str, Any]:
        return {"layers": [[0.25, 0.75]], "heads": [[0.5, 0.5]], "layer": 0}


@dataclass
class Engine:
    reads: list[str] = field(default_factory=list)
    during: dict[str, Any] = field(default_factory=dict)  # read -> what happens meanwhile

    def _read(self, name: str) -> None:
        self.reads.append(name)
        self.during.get(name, lambda: None)()

    def look_ahead_in_slices(self, state, ids, steps):
        self._read("lookahead")  # the first forward
        yield
        self._read("lookahead-more")  # the next: not read once the state moved on
        return []

    def attention(self, state):
        self._read("attention")
        return View()

    def snapshot(self, state):
        self._read("snapshot")
        return b"frozen"


class Loop:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def call(self, fn, *args):
        return fn(self.engine, *args)

    def call_in_slices(self, fn, *args):
        slices = fn(self.engine, *args)
        while True:
            try:
                next(slices)
            except StopIteration as done:
                return done.value


@dataclass
class State:
    generated_ids: list[int]


def describer_over(engine: Engine, kept: list[bytes]) -> Describer:
    return Describer(lambda: Loop(engine), lambda session, data: kept.append(data) or True)


def job_for(describer: Describer, session, state: State) -> Job:
    of = events.detail_of(session.pauses.get().pk, None, len(state.generated_ids))
    epoch = describer.epoch(session.pk)
    return Job(session, state, of, tuple(state.generated_ids), (11, 12), epoch)


def kinds(session) -> list[str]:
    return list(
        SessionEvent.objects.filter(session=session).order_by("seq").values_list("type", flat=True)
    )


def test_it_reads_each_detail_in_order_and_records_it_for_the_pause(alice):
    session, engine, kept = make_session(alice), Engine(), []
    describer = describer_over(engine, kept)
    describer._run(job_for(describer, session, State([11, 12, 13, 14, 15])))
    assert engine.reads == ["lookahead", "lookahead-more", "attention", "snapshot"]
    assert kept == [b"frozen"]
    assert kinds(session) == ["lookahead", "pause_attention", "snapshot"]
    snapshot = SessionEvent.objects.get(session=session, type="snapshot").payload
    assert snapshot["bytes"] == 6 and snapshot["pause_id"] == session.pauses.get().pk
    assert session.pauses.get().attention["layers"] == [[0.25, 0.75]]


def test_it_stops_reading_once_a_new_segment_began(alice):
    session, kept = make_session(alice), []
    engine = Engine()
    describer = describer_over(engine, kept)
    # a resume between two of the look-ahead's forwards: the next one is not run
    engine.during["lookahead"] = lambda: describer.supersede(session.pk)
    job = job_for(describer, session, State([11, 12, 13, 14, 15]))
    with pytest.raises(Stale):
        describer._run(job)
    assert engine.reads == ["lookahead"] and kept == [] and kinds(session) == []


def test_it_reads_nothing_of_a_state_an_edit_changed(alice):
    session, engine, kept = make_session(alice), Engine(), []
    describer = describer_over(engine, kept)
    state = State([11, 12, 13, 14, 15])
    job = job_for(describer, session, state)
    state.generated_ids.append(16)  # an edit applied before the details were read
    with pytest.raises(Stale):
        describer._run(job)
    assert engine.reads == [] and kinds(session) == []


def test_it_keeps_no_snapshot_of_a_session_that_ended(alice):
    session, engine = make_session(alice), Engine()
    describer = Describer(lambda: Loop(engine), lambda session, data: False)
    describer._run(job_for(describer, session, State([11, 12, 13, 14, 15])))
    assert kinds(session) == ["lookahead", "pause_attention"]


def test_it_forgets_a_session_whose_state_went_and_its_old_details_stay_stale(alice):
    session, engine, kept = make_session(alice), Engine(), []
    describer = describer_over(engine, kept)
    describer.supersede(session.pk)
    job = job_for(describer, session, State([11, 12, 13, 14, 15]))
    describer.forget(session.pk)  # its state was dropped: the session ended here
    assert session.pk not in describer._epochs
    describer.supersede(session.pk)  # resumed here later
    with pytest.raises(Stale):
        describer._run(job)
    assert engine.reads == []


def test_the_worker_forgets_a_session_once_its_state_is_released():
    from reviewer.worker import runtime, tasks

    runtime.describer.supersede(7)
    tasks.release_state(7)
    assert 7 not in runtime.describer._epochs
