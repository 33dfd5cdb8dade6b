"""The floor in figures: /metrics counts what waits in each domain's queue and what is past
its SLA; the dashboard gives, per domain, pause-to-claim and pause-to-decision times, items past
SLA, the share approved without a pause and edits per reviewed generation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from reviewer import lifecycle
from reviewer.analytics.floor import floor_figures
from reviewer.models import Edit, PauseEvent, ReviewSession
from tests.floor_factory import contracts, gateway_session, make_floor
from tests.session_factory import clinical_notes, make_session, stub_worker
from tests.test_metrics import scrape, value

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="carol-password-1")


@pytest.fixture
def floor(alice, bob, carol):
    make_floor(alice, bob, carol)
    domain = clinical_notes()
    domain.review_sla_minutes = 15
    domain.save()


def test_it_exports_waiting_and_past_sla_items_per_domain(client, floor, alice):
    gateway_session(waited_min=20)  # past the 15 minutes
    gateway_session(S.GENERATED, waited_min=30)  # past too
    gateway_session(waited_min=3)
    gateway_session(S.RUNNING)  # not waiting
    make_session(alice, S.PAUSED, waiting_since=timezone.now() - timedelta(hours=1))  # her own
    samples = scrape(client.get("/metrics").content.decode())
    assert value(samples, "caesura_queue_waiting", domain="clinical-notes") == 3
    assert value(samples, "caesura_queue_past_sla", domain="clinical-notes") == 2
    assert ("caesura_queue_waiting", (("domain", "contracts"),)) in samples  # a zero is a sample
    assert value(samples, "caesura_queue_past_sla", domain="contracts") == 0


def paused_for(seconds: float) -> ReviewSession:
    """A gateway generation whose (only) pause halted this many seconds ago."""
    session = gateway_session()
    PauseEvent.objects.filter(session=session).update(
        halted_at=timezone.now() - timedelta(seconds=seconds)
    )
    return session


def test_it_measures_the_floor_per_domain(floor, alice, monkeypatch):
    stub_worker(monkeypatch)
    waits = [60, 120, 300]
    for seconds in waits:
        session = paused_for(seconds)
        lifecycle.claim(alice, session.pk)
        lifecycle.approve(alice, session.pk)
    edited = paused_for(10)  # claimed and edited twice (one refused), not yet decided
    lifecycle.claim(alice, edited.pk)
    for error in ("", "", "out of range"):
        Edit.objects.create(session=edited, kind="replace", author=alice, error=error)
    gateway_session(S.COMPLETED)  # approved without a pause
    gateway_session(S.GENERATED, waited_min=40)  # unclaimed, past SLA, no pause
    make_session(alice, S.COMPLETED)  # her own session: not the floor's
    [clinical] = floor_figures(S.objects.all(), [clinical_notes()])
    assert clinical.generations == 6
    assert clinical.claim_p(50) == pytest.approx(90, abs=5)  # 10, 60, 120, 300
    assert clinical.claim_p(95) == pytest.approx(120 + 0.85 * 180, abs=5)
    assert clinical.decision_p(50) == pytest.approx(120, abs=5)  # 60, 120, 300
    assert clinical.past_sla == 1
    assert clinical.approved_unpaused_share == pytest.approx(1 / 6)
    assert clinical.edits_per_reviewed == pytest.approx(2 / 4)
    [other] = floor_figures(S.objects.all(), [contracts()])
    assert other.generations == 0 and other.claim_p(50) is None


def test_it_shows_the_floor_on_the_dashboard(client, floor, admin_user, alice, monkeypatch):
    stub_worker(monkeypatch)
    session = paused_for(90)
    lifecycle.claim(alice, session.pk)
    client.force_login(admin_user)
    page = client.get(reverse("dashboard")).content.decode()
    row = page.split('data-floor-domain="Clinical notes"')[1].split("</tr>")[0]
    assert '<td data-figure="generations">1</td>' in row
    assert "9" in row.split('data-figure="claim">')[1][:3]  # about 90 s
    assert '<td data-figure="decision">no data</td>' in row
