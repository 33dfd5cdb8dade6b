"""A claim lasts only while its holder may act on the session: an active reviewer of its domain,
or active staff. A holder deactivated, deleted or taken off the domain holds nothing from that
moment, so the domain's other reviewers claim and act at once, and the sweep drops the claim
with a ``claim_expired`` record that says why (its ``cause``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from reviewer import lifecycle
from reviewer.lifecycle import audit, claims
from reviewer.models import AuditRecord, ReviewSession
from tests.floor_factory import gateway_session
from tests.session_factory import clinical_notes, stub_worker
from tests.test_admin_audit import page_as_posted

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def floor(alice, bob):
    """Alice and Bob review clinical notes; a generation from an application waits there."""
    clinical_notes().reviewers.add(alice, bob)
    return gateway_session()


def trail(session) -> list[tuple[str, str, dict]]:
    rows = AuditRecord.objects.filter(session=session).order_by("id")
    return list(rows.values_list("action", "actor", "payload"))


def expired(session) -> dict:
    return AuditRecord.objects.filter(session=session, action="claim_expired").get().payload


def api_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_reviewer_taken_off_the_domain_holds_no_claim_and_another_takes_it_at_once(
    floor, alice, bob, monkeypatch
):
    stub_worker(monkeypatch)
    lifecycle.claim(alice, floor.pk)
    clinical_notes().reviewers.remove(alice)
    floor.refresh_from_db()
    assert claims.holder(floor) is None and claims.claim_info(floor)["claimed_by"] is None
    with pytest.raises(lifecycle.NotFound):
        lifecycle.approve(alice, floor.pk)  # she no longer sees the session
    assert lifecycle.claim(bob, floor.pk)["claimed_by"] == "bob"  # no 409 until it lapses
    assert [action for action, _, _ in trail(floor)] == ["claim", "claim_expired", "claim"]
    assert expired(floor) == {"reviewer": "alice", "cause": "not_a_reviewer"}
    lifecycle.approve(bob, floor.pk)
    floor.refresh_from_db()
    assert floor.status == S.COMPLETED and floor.reviewer_name == "bob"
    assert audit.first_broken_record() is None


def test_the_sweep_drops_the_claim_of_a_holder_taken_off_the_domain(floor, alice, bob):
    lifecycle.claim(alice, floor.pk)
    clinical_notes().reviewers.remove(alice)
    assert claims.expire_lapsed() == 1
    assert claims.expire_lapsed() == 0  # dropped once
    floor.refresh_from_db()
    assert floor.claimed_by is None and floor.claim_expires_at is None
    assert trail(floor)[-1] == (
        "claim_expired",
        "system",
        {"reviewer": "alice", "cause": "not_a_reviewer"},
    )
    assert floor.events.filter(type="claim").count() == 2  # the claim, then its end


def test_a_deactivated_holder_holds_no_claim(floor, alice, bob, monkeypatch):
    stub_worker(monkeypatch)
    lifecycle.claim(alice, floor.pk)
    type(alice).objects.filter(pk=alice.pk).update(is_active=False)
    floor.refresh_from_db()
    assert claims.holder(floor) is None
    # Before the sweep, Bob's command is told to claim first, not that Alice holds it.
    with pytest.raises(lifecycle.Conflict, match="claim it first"):
        lifecycle.approve(bob, floor.pk)
    assert claims.expire_lapsed() == 1
    assert expired(floor) == {"reviewer": "alice", "cause": "inactive"}
    lifecycle.claim(bob, floor.pk)
    lifecycle.approve(bob, floor.pk)


def test_the_tab_title_counts_a_session_a_deactivated_holder_claimed_before_any_sweep(
    floor, alice, bob
):
    from reviewer.web import queue

    lifecycle.claim(alice, floor.pk)
    assert queue.waiting_count(bob) == 0  # Alice holds it
    type(alice).objects.filter(pk=alice.pk).update(is_active=False)
    assert queue.waiting_count(bob) == 1  # hers no longer: it waits for Bob


def test_a_deleted_holders_claim_is_swept_under_their_name(floor, alice, bob):
    lifecycle.claim(alice, floor.pk)
    alice.delete()  # the session keeps no link to her (SET_NULL); the claim's expiry stays
    floor.refresh_from_db()
    assert floor.claimed_by_id is None and floor.claim_expires_at is not None
    assert claims.holder(floor) is None
    assert claims.expire_lapsed() == 1
    floor.refresh_from_db()
    assert floor.claim_expires_at is None
    assert expired(floor) == {"reviewer": "alice", "cause": "deleted"}
    assert lifecycle.claim(bob, floor.pk)["claimed_by"] == "bob"


def test_a_plain_lapse_says_so(floor, alice):
    lifecycle.claim(alice, floor.pk)
    S.objects.filter(pk=floor.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert claims.expire_lapsed() == 1
    assert expired(floor) == {"reviewer": "alice", "cause": "lapsed"}


def test_staff_hold_a_claim_on_any_domain_while_they_are_staff(floor, alice, django_user_model):
    """Staff see and may claim every session: not being a reviewer of the domain ends
    nothing; losing staff status (and not reviewing the domain) does."""
    sam = django_user_model.objects.create_user("sam", password="sam-password-1", is_staff=True)
    lifecycle.claim(sam, floor.pk)
    assert claims.expire_lapsed() == 0
    with pytest.raises(lifecycle.Conflict, match="claimed by sam"):
        lifecycle.claim(alice, floor.pk)
    django_user_model.objects.filter(pk=sam.pk).update(is_staff=False)
    floor.refresh_from_db()
    assert claims.holder(floor) is None
    assert claims.expire_lapsed() == 1
    assert expired(floor) == {"reviewer": "sam", "cause": "not_a_reviewer"}
    # A reviewer of the domain who is staff as well keeps the claim either way.
    django_user_model.objects.filter(pk=alice.pk).update(is_staff=True)
    alice.refresh_from_db()
    lifecycle.claim(alice, floor.pk)
    django_user_model.objects.filter(pk=alice.pk).update(is_staff=False)
    assert claims.expire_lapsed() == 0


def test_a_reviewer_who_still_reviews_the_domain_keeps_the_claim(floor, alice, bob):
    lifecycle.claim(alice, floor.pk)
    clinical_notes().reviewers.remove(bob)
    assert claims.expire_lapsed() == 0
    floor.refresh_from_db()
    assert claims.holder(floor) == alice


def test_the_queue_row_offers_the_claim_before_any_sweep(floor, alice, bob):
    """The queue's rows read the domain's reviewers prefetched: the same answer."""
    lifecycle.claim(alice, floor.pk)
    clinical_notes().reviewers.remove(alice)
    item = api_client(bob).get(f"/queue/items/{floor.pk}").json()
    assert item["claimable"] and item["waiting"]


def test_an_admin_who_makes_another_the_only_reviewer_frees_the_session_at_once(
    floor, alice, bob, admin_user, django_capture_on_commit_callbacks
):
    """The reviewer's report: dr_chen claims, an admin makes nurse_ng the domain's only
    reviewer; dr_chen got 404 and nurse_ng 409 "claimed by dr_chen" until the claim lapsed."""
    clinical_notes().reviewers.remove(bob)
    holder = api_client(alice)
    url = f"/api/sessions/{floor.pk}/claim"
    assert holder.post(url, content_type="application/json").json()["claimed_by"] == "alice"

    staff = api_client(admin_user)
    change = f"/admin/reviewer/domain/{clinical_notes().pk}/change/"
    data = page_as_posted(staff, change)
    data["reviewers"] = [str(bob.pk)]
    with django_capture_on_commit_callbacks(execute=True):
        assert staff.post(change, data).status_code == 302
    # Dropped as the change committed, audited after the change of reviewers.
    changed = AuditRecord.objects.get(action="domain_reviewers_changed")
    assert changed.payload["after"] == ["bob"]
    assert expired(floor) == {"reviewer": "alice", "cause": "not_a_reviewer"}
    assert AuditRecord.objects.get(action="claim_expired").pk > changed.pk

    assert holder.post(url, content_type="application/json").status_code == 404
    taken = api_client(bob).post(url, content_type="application/json")
    assert taken.status_code == 200 and taken.json()["claimed_by"] == "bob"
    assert audit.first_broken_record() is None


def test_a_decided_session_still_names_its_reviewer_once_their_account_is_deleted(
    floor, alice, monkeypatch
):
    stub_worker(monkeypatch)
    S.objects.filter(pk=floor.pk).update(status=S.GENERATED)
    lifecycle.claim(alice, floor.pk)
    lifecycle.approve(alice, floor.pk, "fine")
    alice.delete()  # she approved without editing: nothing of hers protects the account
    floor.refresh_from_db()
    assert floor.claimed_by_id is None
    assert (floor.reviewer_name, floor.decided_by) == ("alice", "alice")
    client = Client()
    client.force_login(type(alice).objects.create_superuser("root2", password="x-Root-42"))
    assert client.get(f"/api/sessions/{floor.pk}").json()["reviewer"] == "alice"
