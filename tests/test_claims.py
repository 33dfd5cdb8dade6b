"""Review on a floor: a gateway session has no owner; every reviewer of its domain sees it, one
claims it, and only the claim's holder drives it until they decide, release it or it lapses."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from reviewer import lifecycle
from reviewer.lifecycle import claims
from reviewer.models import AuditRecord, ReviewSession
from tests.session_factory import clinical_notes, make_session, stub_worker

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def floor(alice, bob):
    """Alice and Bob review clinical notes; the waiting session came from an application."""
    clinical_notes().reviewers.add(alice, bob)
    return make_session(None)


@pytest.fixture
def carol(django_user_model):
    """Carol reviews another domain: she must never see the clinical floor."""
    return django_user_model.objects.create_user("carol", password="carol-password-1")


def actions(session) -> list[str]:
    return list(AuditRecord.objects.filter(session=session).values_list("action", flat=True))


def test_it_shows_an_ownerless_session_to_every_reviewer_of_its_domain_only(
    floor, alice, bob, carol
):
    assert list(S.objects.visible_to(alice)) == [floor]
    assert list(S.objects.visible_to(bob)) == [floor]
    assert list(S.objects.visible_to(carol)) == []
    with pytest.raises(lifecycle.NotFound):
        lifecycle.claim(carol, floor.pk)


def test_it_lets_one_reviewer_claim_and_tells_the_other_who_has_it(floor, alice, bob):
    answer = lifecycle.claim(alice, floor.pk)
    assert answer["claimed_by"] == "alice" and answer["claim_expires_at"]
    with pytest.raises(lifecycle.Conflict, match="claimed by alice"):
        lifecycle.claim(bob, floor.pk)
    assert actions(floor) == ["claim"]
    assert floor.events.filter(type="claim").count() == 1


def test_it_refuses_commands_from_anyone_but_the_holder(floor, alice, bob, monkeypatch):
    stub_worker(monkeypatch)
    with pytest.raises(lifecycle.Conflict, match="claim it first"):
        lifecycle.approve(alice, floor.pk)
    lifecycle.claim(alice, floor.pk)
    with pytest.raises(lifecycle.Conflict, match="claimed by alice"):
        lifecycle.approve(bob, floor.pk)
    floor.refresh_from_db()
    assert floor.status == S.PAUSED
    lifecycle.approve(alice, floor.pk)
    floor.refresh_from_db()
    assert floor.status == S.COMPLETED and floor.reviewer_name == "alice"
    assert claims.holder(floor) is None  # an ended session's claim lapses


def test_it_renews_the_claim_on_the_holders_activity(floor, alice, monkeypatch):
    stub_worker(monkeypatch)
    lifecycle.claim(alice, floor.pk)
    S.objects.filter(pk=floor.pk).update(claim_expires_at=timezone.now() + timedelta(seconds=5))
    lifecycle.edit(alice, floor.pk, start=0, end=3, text="A")
    floor.refresh_from_db()
    assert floor.claim_expires_at > timezone.now() + timedelta(minutes=9)


def test_it_releases_and_expires_claims_with_an_audit_record(floor, alice, bob):
    lifecycle.claim(alice, floor.pk)
    with pytest.raises(lifecycle.Conflict):
        lifecycle.release(bob, floor.pk)
    lifecycle.release(alice, floor.pk)
    lifecycle.claim(bob, floor.pk)
    S.objects.filter(pk=floor.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert claims.expire_lapsed() == 1
    lifecycle.claim(alice, floor.pk)
    assert actions(floor) == ["claim", "release", "claim", "claim_expired", "claim"]


def test_it_lets_only_staff_reassign_and_only_to_the_domains_reviewers(
    floor, alice, bob, carol, admin_user
):
    lifecycle.claim(alice, floor.pk)
    with pytest.raises(lifecycle.Conflict, match="Only staff"):
        lifecycle.reassign(bob, floor.pk, reviewer="bob")
    with pytest.raises(lifecycle.InvalidInput, match="“carol” is not a reviewer of Clinical"):
        lifecycle.reassign(admin_user, floor.pk, reviewer="carol")
    answer = lifecycle.reassign(admin_user, floor.pk, reviewer="bob")
    assert answer["claimed_by"] == "bob"
    record = AuditRecord.objects.filter(session=floor, action="reassign").get()
    assert record.actor == "root" and record.payload["previous"] == "alice"


def test_it_records_a_lapsed_claim_before_staff_reassign_the_session(floor, alice, admin_user):
    lifecycle.claim(alice, floor.pk)
    S.objects.filter(pk=floor.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    lifecycle.reassign(admin_user, floor.pk, reviewer="bob")
    assert actions(floor) == ["claim", "claim_expired", "reassign"]
    record = AuditRecord.objects.filter(session=floor, action="reassign").get()
    assert "previous" not in record.payload  # alice's claim had lapsed: nobody held it


def test_it_lets_a_domain_reviewer_retry_a_failed_generation(floor, alice, bob, monkeypatch):
    """A failed session's claim ended with it, and nobody can claim a failed session: the
    reviewer who resumes it takes the claim, and drives it from then on."""
    stub_worker(monkeypatch)
    S.objects.filter(pk=floor.pk).update(status=S.FAILED, error="The task queue was down")
    assert lifecycle.resume(alice, floor.pk)["status"] == S.RUNNING
    floor.refresh_from_db()
    assert claims.holder(floor) == alice and floor.error == ""
    assert actions(floor) == ["claim", "resume"]
    S.objects.filter(pk=floor.pk).update(status=S.FAILED)
    with pytest.raises(lifecycle.Conflict, match="claimed by alice"):
        lifecycle.resume(bob, floor.pk)  # alice's claim still runs: hers to retry


def test_it_refuses_to_claim_an_owned_or_running_session(floor, alice):
    own = make_session(alice)
    with pytest.raises(lifecycle.NotFound, match="has an owner"):
        lifecycle.claim(alice, own.pk)
    S.objects.filter(pk=floor.pk).update(status=S.RUNNING)
    with pytest.raises(lifecycle.Conflict, match="Only a paused or generated"):
        lifecycle.claim(alice, floor.pk)


@pytest.mark.django_db(transaction=True)
def test_it_lets_exactly_one_of_two_simultaneous_claims_win(alice, bob):
    clinical_notes().reviewers.add(alice, bob)
    session = make_session(None)
    barrier, results = threading.Barrier(2), {}

    def try_claim(user):
        barrier.wait()
        try:
            results[user.username] = lifecycle.claim(user, session.pk)["claimed_by"]
        except lifecycle.Conflict as exc:
            results[user.username] = str(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=try_claim, args=(u,)) for u in (alice, bob)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [name for name, result in results.items() if result == name]
    assert len(winners) == 1
    loser = ({"alice", "bob"} - set(winners)).pop()
    assert f"claimed by {winners[0]}" in results[loser]


def test_it_tells_each_claim_record_in_the_timeline_in_both_languages(
    floor, alice, bob, admin_user, settings
):
    from django.core.management import call_command
    from django.utils import translation

    from reviewer.analytics.timeline import timeline

    call_command("compile_translations", verbosity=0)
    settings.LOCALE_PATHS = list(settings.LOCALE_PATHS)  # Django reloads its catalogs
    lifecycle.claim(alice, floor.pk)
    lifecycle.release(alice, floor.pk)
    lifecycle.claim(bob, floor.pk)
    lifecycle.reassign(admin_user, floor.pk, reviewer="alice")
    S.objects.filter(pk=floor.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    claims.expire_lapsed()
    told = [(e["actor"], e["action"], e["detail"]) for e in timeline(floor)]
    assert told == [
        ("alice", "Claimed", ""),
        ("alice", "Claim released", ""),
        ("bob", "Claimed", ""),
        ("root", "Claim reassigned", "to alice"),
        ("system", "Claim expired", ""),
    ]
    with translation.override("zh-hans"):
        told = [(e["action"], e["detail"]) for e in timeline(floor)]
    assert told[0] == ("已认领", "") and told[3] == ("认领已转交", "转交给 alice")


def test_it_refuses_to_approve_an_answer_holding_the_applications_stop_string(floor, alice):
    """A policy paused on the token that completed a stop string: approving would send it."""
    S.objects.filter(pk=floor.pk).update(gateway={"stop": ["fever"]})
    lifecycle.claim(alice, floor.pk)
    with pytest.raises(lifecycle.Conflict, match="“fever”, where the application asked"):
        lifecycle.approve(alice, floor.pk)
    floor.refresh_from_db()
    assert floor.status == S.PAUSED and "approve" not in actions(floor)
    S.objects.filter(pk=floor.pk).update(gateway={"stop": ["nothing like it"]})
    assert lifecycle.approve(alice, floor.pk)["status"] == S.COMPLETED
