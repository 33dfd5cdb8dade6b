"""A small, fully known history of review sessions for the ROI figures and the dashboard.

Alice's two sessions and Bob's one, on 3 and 4 March 2025, in the domain "Plain":

session A (alice): P1 manual (latency 100 ms, 2 alternatives), "choose" after 10 s, resumed
    after 30 s; P2 policy "Dosage" (no alternatives), replace after 5 s, resumed after 20 s;
    a resume follows the edits: reviewed with pause-edit-continue.
session B (alice): P3 manual (300 ms, alternatives), a refused edit, resumed after 40 s;
    P4 policy "Low confidence" (alternatives), resumed after 8 s, no edit;
    P5 policy "Dosage" (alternatives), rollback after 12 s, still open. No resume after an edit.
session C (bob): no pauses.
"""

from __future__ import annotations

import datetime as dt

from reviewer.lifecycle import audit
from reviewer.models import Edit, PauseEvent, ReviewSession, RoiSettings

DAY_1 = dt.datetime(2025, 3, 3, 9, 0, tzinfo=dt.UTC)
DAY_2 = dt.datetime(2025, 3, 4, 9, 0, tzinfo=dt.UTC)
ALTERNATIVES = [
    {"token_id": 5, "text": " a", "prob": 0.4},
    {"token_id": 6, "text": " b", "prob": 0.2},
]


def make_session(owner, domain, created_at: dt.datetime, tokens: int) -> ReviewSession:
    session = ReviewSession.objects.create(
        owner=owner,
        domain=domain,
        input_text="Note.",
        model_name="tiny",
        status=ReviewSession.COMPLETED,
        generated_ids=list(range(tokens)),
        task_type="open",
    )
    ReviewSession.objects.filter(pk=session.pk).update(created_at=created_at)
    session.refresh_from_db()
    return session


def make_pause(
    session, halted_at, trigger="manual", latency_ms=None, alternatives=(), resumed_s=None
):
    return PauseEvent.objects.create(
        session=session,
        position=1,
        trigger=trigger,
        kind="manual" if trigger == "manual" else "keyword",
        reason="test",
        alternatives=list(alternatives),
        halted_at=halted_at,
        resumed_at=halted_at + dt.timedelta(seconds=resumed_s) if resumed_s is not None else None,
        latency_ms=latency_ms,
    )


def make_edit(pause, kind: str, after_s: float, error: str = "") -> Edit:
    edit = Edit.objects.create(
        session=pause.session,
        pause=pause,
        kind=kind,
        author=pause.session.owner,
        applied=not error,
        error=error,
    )
    Edit.objects.filter(pk=edit.pk).update(
        created_at=pause.halted_at + dt.timedelta(seconds=after_s)
    )
    return edit


def build_history(alice, bob, domain) -> dict[str, ReviewSession]:
    a = make_session(alice, domain, DAY_1, tokens=40)
    p1 = make_pause(a, DAY_1, latency_ms=100, alternatives=ALTERNATIVES, resumed_s=30)
    make_edit(p1, "choose", 10)
    p2 = make_pause(a, DAY_1 + dt.timedelta(minutes=2), trigger="Dosage", resumed_s=20)
    make_edit(p2, "replace", 5)
    audit.append("resume", alice.username, a)  # now: after both edits

    b = make_session(alice, domain, DAY_2, tokens=30)
    p3 = make_pause(b, DAY_2, latency_ms=300, alternatives=ALTERNATIVES, resumed_s=40)
    make_edit(p3, "replace", 3, error="refused")
    later = DAY_2 + dt.timedelta(minutes=1)
    make_pause(b, later, trigger="Low confidence", alternatives=ALTERNATIVES, resumed_s=8)
    p5 = make_pause(b, later + dt.timedelta(minutes=1), trigger="Dosage", alternatives=ALTERNATIVES)
    make_edit(p5, "truncate", 12)

    c = make_session(bob, domain, DAY_2 + dt.timedelta(hours=1), tokens=20)
    return {"a": a, "b": b, "c": c}


def set_roi_settings(domain) -> RoiSettings:
    return RoiSettings.objects.create(
        domain=domain,
        baseline_regenerate_cycles=2,
        minutes_saved_per_cycle=15,
        reviewer_hourly_cost=120,
        loss_avoided_per_interception=500,
        annual_system_cost=10000,
    )
