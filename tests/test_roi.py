"""Pause ROI figures from a constructed history (tests/roi_factory.py), checked by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from reviewer.analytics import roi
from reviewer.lifecycle import audit
from reviewer.models import Domain, PauseEvent, RoiSettings
from tests.roi_factory import (
    ALTERNATIVES,
    DAY_1,
    DAY_2,
    build_history,
    make_edit,
    make_pause,
    make_session,
    set_roi_settings,
)

pytestmark = pytest.mark.django_db


def figures_for(domain, **filters) -> dict:
    rows = roi.session_rows(roi.sessions_in(domain=domain, **filters))
    return roi.figures(rows, roi.settings_for([domain]))


def test_it_counts_pauses_per_session_by_trigger(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    got = figures_for(plain_domain)
    assert got["sessions"] == 3 and got["pauses"] == 5 and got["tokens"] == 90
    # manual: P1, P3; Dosage: P2, P5; Low confidence: P4 — over three sessions.
    assert got["pauses_by_trigger"] == {"Dosage": 2, "Low confidence": 1, "manual": 2}
    assert got["pauses_per_session_by_trigger"] == pytest.approx(
        {"Dosage": 2 / 3, "Low confidence": 1 / 3, "manual": 2 / 3}
    )


def test_it_computes_latency_decision_time_and_rates(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    got = figures_for(plain_domain)
    # Manual latencies 100 and 300 ms: p50 = 200, p95 = 100 + 0.95 * 200 = 290.
    assert got["manual_latency_ms_p50"] == pytest.approx(200)
    assert got["manual_latency_ms_p95"] == pytest.approx(290)
    # Decisions: P1 choose at 10 s (before its resume at 30), P2 edit at 5, P3 resume at 40
    # (its refused edit does not count), P4 resume at 8, P5 rollback at 12.
    assert got["decision_seconds_p50"] == pytest.approx(10)
    assert got["decision_seconds_mean"] == pytest.approx((10 + 5 + 40 + 8 + 12) / 5)
    # choose + replace + truncate (the refused edit left out) over five pauses.
    assert got["edits_per_pause"] == pytest.approx(3 / 5)
    # One "choose" over the four pauses that offered alternatives (P1, P3, P4, P5).
    assert got["accepted_alternative_rate"] == pytest.approx(1 / 4)
    # Policy pauses P2, P4, P5; P2 (edit) and P5 (rollback) intercepted.
    assert got["interception_rate"] == pytest.approx(2 / 3)
    assert got["interceptions"] == 2 and got["reviewer_rollbacks"] == 1


def test_it_prices_the_reviewed_generations_with_the_admin_settings(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    set_roi_settings(plain_domain)
    got = figures_for(plain_domain)
    # Only session A was edited at a pause and then continued.
    assert got["reviewed_generations"] == 1
    assert got["avoided_regenerate_cycles"] == pytest.approx(2)  # 1 × baseline 2
    assert got["compression_ratio"] == pytest.approx(3)  # 1 generation instead of 1 + 2
    assert got["hours_saved"] == pytest.approx(0.5)  # 2 cycles × 15 min
    # 0.5 h × 120 + 2 interceptions × 500 = 1060, over an annual cost of 10,000.
    assert got["value"] == pytest.approx(1060)
    assert got["roi"] == pytest.approx(0.106)
    assert roi.settings_for([plain_domain])["Plain"]["set_by_admin"] is True


def test_it_filters_by_reviewer_and_period(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    assert figures_for(plain_domain, reviewer=bob)["sessions"] == 1
    assert figures_for(plain_domain, reviewer=bob)["pauses"] == 0
    day_2 = figures_for(plain_domain, start=DAY_2, end=DAY_2 + dt.timedelta(days=1))
    assert day_2["sessions"] == 2 and day_2["pauses"] == 3
    assert day_2["manual_latency_ms_p50"] == pytest.approx(300)


def test_it_reports_nothing_rather_than_dividing_by_zero(alice, bob, plain_domain):
    got = figures_for(plain_domain)
    assert got["sessions"] == 0
    assert got["pauses_per_session"] is None and got["manual_latency_ms_p50"] is None
    assert got["roi"] is None  # no annual system cost set: default 0
    assert roi.settings_for([plain_domain])["Plain"]["set_by_admin"] is False


def test_it_groups_figures_by_day_and_week(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    rows = roi.session_rows(roi.sessions_in(domain=plain_domain))
    settings = roi.settings_for([plain_domain])
    days = roi.time_series(rows, settings, "day")
    assert [(d["period"], d["sessions"], d["pauses"]) for d in days] == [
        ("2025-03-03", 1, 2),
        ("2025-03-04", 2, 3),
    ]
    weeks = roi.time_series(rows, settings, "week")
    assert [(w["period"], w["sessions"]) for w in weeks] == [("2025-03-03", 3)]


def test_it_writes_one_csv_row_per_session(alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    rows = roi.session_rows(roi.sessions_in(domain=plain_domain))
    values = dict(zip(roi.SessionRow.CSV_FIELDS, rows[1].csv_values(), strict=True))
    assert values["reviewer"] == "alice" and values["pauses"] == 3
    assert values["pauses_by_trigger"] == "Dosage=1; Low confidence=1; manual=1"
    assert values["interceptions"] == 1 and values["edits"] == 1


def test_it_leaves_out_the_edits_at_a_reopened_pause(alice, plain_domain):
    """A generated text reopened for an edit: its pause is no pause of the run, nor its edits."""
    session = make_session(alice, plain_domain, DAY_1, tokens=10)
    make_pause(session, DAY_1, trigger="Dosage", resumed_s=5)  # no edit
    reopened = PauseEvent.objects.create(
        session=session,
        position=10,
        trigger="manual",
        kind=PauseEvent.REOPENED,
        reason="Reopened",
        alternatives=ALTERNATIVES,
        halted_at=DAY_1 + dt.timedelta(minutes=5),
    )
    make_edit(reopened, "replace", 3)
    make_edit(reopened, "choose", 6)
    audit.append("resume", alice.username, session)  # after both edits
    got = figures_for(plain_domain)
    assert got["pauses"] == 1 and got["edits_per_pause"] == 0
    assert got["accepted_alternative_rate"] is None  # the one pause offered none
    assert got["reviewed_generations"] == 0
    [row] = roi.session_rows(roi.sessions_in(domain=plain_domain))
    assert (row.edits, row.chosen_alternatives) == (0, 0)
    assert not row.reviewed_with_pause_edit_continue


def test_it_counts_a_pause_once_however_often_its_reviewer_chose(alice, plain_domain):
    """Each choice offers the next token's alternatives: three choices at one pause."""
    session = make_session(alice, plain_domain, DAY_1, tokens=10)
    pause = make_pause(session, DAY_1, alternatives=ALTERNATIVES, resumed_s=30)
    for after_s in (5, 8, 9):
        make_edit(pause, "choose", after_s)
    make_pause(session, DAY_1 + dt.timedelta(minutes=1), alternatives=ALTERNATIVES, resumed_s=4)
    got = figures_for(plain_domain)
    assert got["accepted_alternative_rate"] == pytest.approx(1 / 2)
    assert got["edits_per_pause"] == pytest.approx(3 / 2)  # every edit still counts there


def test_it_leaves_a_domain_without_a_system_cost_out_of_the_roi(alice, plain_domain):
    """Plain costs 10,000 a year and intercepted once (100); Other has no cost set and
    intercepted once (500): its value is shown, but has no ROI to add to Plain's."""
    other = Domain.objects.create(name="Other", slug="other", specialty="x", system_prompt="x")
    priced = {"reviewer_hourly_cost": 0}
    RoiSettings.objects.create(
        domain=plain_domain, annual_system_cost=10000, loss_avoided_per_interception=100, **priced
    )
    RoiSettings.objects.create(
        domain=other, annual_system_cost=0, loss_avoided_per_interception=500, **priced
    )
    for domain in (plain_domain, other):
        pause = make_pause(make_session(alice, domain, DAY_1, tokens=10), DAY_1, trigger="Dosage")
        make_edit(pause, "replace", 5)
    rows = roi.session_rows(roi.sessions_in())
    got = roi.figures(rows, roi.settings_for([plain_domain, other]))
    assert got["interceptions"] == 2 and got["value"] == pytest.approx(600)
    assert got["roi"] == pytest.approx(100 / 10000)
    assert got["costed_value"] == pytest.approx(100)
