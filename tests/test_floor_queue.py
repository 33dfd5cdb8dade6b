"""The queue page is the floor: each reviewer sees their own sessions and the gateway
generations of their domains, how long each has waited, who holds it, which are past the
domain's SLA; claims go through the API and lapsed ones are swept when the queue is read."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from reviewer import lifecycle
from reviewer.models import AuditRecord, ReviewSession
from tests.floor_factory import gateway_session, make_floor
from tests.session_factory import clinical_notes, make_session

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def carol(django_user_model):
    """Carol reviews contracts: the clinical floor is none of her business."""
    return django_user_model.objects.create_user("carol", password="carol-password-1")


@pytest.fixture
def floor(alice, bob, carol):
    make_floor(alice, bob, carol)


def queue_of(client, user) -> str:
    client.force_login(user)
    return client.get("/").content.decode()


def row(page: str, session_id: int) -> str:
    found = re.search(rf'<tr id="queue-row-{session_id}".*?</tr>', page, re.S)
    assert found, f"session {session_id} is not in the queue"
    return found.group(0)


def test_it_shows_the_floor_to_its_domains_reviewers_and_nobody_else(
    client, floor, alice, bob, carol
):
    waiting = gateway_session(waited_min=7)
    own = make_session(alice, S.GENERATED)
    page = queue_of(client, alice)
    item = row(page, waiting.pk)
    assert "Note drafter" in item and "Unclaimed" in item
    assert f'data-claim="{waiting.pk}"' in item and "7 min" in item
    assert "<title>(2) Queue · Caesura</title>" in page  # the floor's item and her own
    assert "you" in row(page, own.pk)
    assert f"queue-row-{waiting.pk}" in queue_of(Client(), bob)
    carols = queue_of(Client(), carol)
    assert f"queue-row-{waiting.pk}" not in carols and "<title>Queue · Caesura</title>" in carols


def test_it_shows_who_holds_a_claim_and_offers_release_to_the_holder_only(
    client, floor, alice, bob
):
    waiting = gateway_session()
    lifecycle.claim(alice, waiting.pk)
    item = row(queue_of(client, alice), waiting.pk)
    assert "Claimed by you" in item and f'data-release="{waiting.pk}"' in item
    bobs = queue_of(Client(), bob)
    item = row(bobs, waiting.pk)
    assert "Claimed by alice" in item and 'data-claim="' not in item and "data-release" not in item
    assert "<title>Queue · Caesura</title>" in bobs  # held by alice: not waiting for bob


def test_it_marks_items_past_the_domains_sla_in_words(client, floor, alice):
    domain = clinical_notes()
    domain.review_sla_minutes = 15
    domain.save()
    late, fresh = gateway_session(waited_min=20), gateway_session(waited_min=2)
    page = queue_of(client, alice)
    late_row, fresh_row = row(page, late.pk), row(page, fresh.pk)
    assert "past-sla" in late_row.split(">")[0] and "past the 15 min SLA" in late_row
    assert '<strong class="sla">' in late_row
    assert "past-sla" not in fresh_row.split(">")[0] and '<strong class="sla" hidden>' in fresh_row


def test_it_lets_one_claim_win_over_http_and_tells_the_other_who_has_it(floor, alice, bob):
    waiting = gateway_session()
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    for client, user in ((first, alice), (second, bob)):
        client.force_login(user)
        client.get("/")  # sets the CSRF cookie
    url = f"/api/sessions/{waiting.pk}/claim"

    def claim(client):
        token = client.cookies["csrftoken"].value
        return client.post(url, content_type="application/json", HTTP_X_CSRFTOKEN=token)

    assert claim(first).json()["claimed_by"] == "alice"
    refused = claim(second)
    assert refused.status_code == 409 and "claimed by alice" in refused.json()["error"]
    assert second.post(url).status_code == 403  # no CSRF token: refused, nothing changed
    waiting.refresh_from_db()
    assert waiting.claimed_by == alice


def test_it_serves_one_row_with_the_viewers_waiting_count(client, floor, alice, carol):
    waiting = gateway_session()
    client.force_login(alice)
    item = client.get(f"/queue/items/{waiting.pk}").json()
    assert item["waiting"] and item["claimable"] and item["waiting_count"] == 1
    assert item["row"].startswith(f'<tr id="queue-row-{waiting.pk}"')
    assert item["domain"] == "Clinical notes"
    client.force_login(carol)
    assert client.get(f"/queue/items/{waiting.pk}").status_code == 404
    assert client.get("/queue/items/999999").status_code == 404


def test_it_sweeps_a_lapsed_claim_when_the_queue_is_read(client, floor, alice, bob):
    waiting = gateway_session()
    lifecycle.claim(alice, waiting.pk)
    S.objects.filter(pk=waiting.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    item = row(queue_of(client, bob), waiting.pk)
    assert "Unclaimed" in item and f'data-claim="{waiting.pk}"' in item
    actions = AuditRecord.objects.filter(session=waiting).values_list("action", flat=True)
    assert list(actions) == ["claim", "claim_expired"]


def test_it_offers_staff_a_reassign_form_naming_the_domains_reviewers(client, floor, admin_user):
    waiting = gateway_session()
    item = row(queue_of(client, admin_user), waiting.pk)
    assert f'data-reassign="{waiting.pk}"' in item
    assert '<option value="alice">' in item and '<option value="bob">' in item
    assert "carol" not in item


@pytest.mark.model  # the session page maps the case text onto the model's tokens
def test_it_puts_the_claim_on_a_gateway_sessions_page_only(client, floor, alice):
    waiting = gateway_session()
    lifecycle.claim(alice, waiting.pk)
    client.force_login(alice)
    page = client.get(f"/sessions/{waiting.pk}/")
    data = page.context["page_data"]
    assert data["onFloor"] and data["claim"]["claimed_by"] == "alice"
    assert 'id="claim-bar"' in page.content.decode() and "Note drafter" in page.content.decode()
    own = make_session(alice)
    page = client.get(f"/sessions/{own.pk}/")
    assert (
        not page.context["page_data"]["onFloor"] and 'id="claim-bar"' not in page.content.decode()
    )
