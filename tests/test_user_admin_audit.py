"""Accounts changed in the admin go into the audit chain like the settings: a user made staff
or inactive, given a group, given a new password or deleted, by whom. The password's hash
never does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from reviewer import lifecycle
from reviewer.lifecycle import audit
from reviewer.models import ApiToken, AuditRecord, ReviewSession
from tests.floor_factory import gateway_session
from tests.session_factory import clinical_notes

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, admin_user):
    client.force_login(admin_user)
    return client


def records(action: str) -> list[tuple[str, dict]]:
    rows = AuditRecord.objects.filter(action=action).order_by("id")
    return list(rows.values_list("actor", "payload"))


def change_form(user: User, **changes) -> dict:
    form = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_active": "on" if user.is_active else "",
        "is_staff": "on" if user.is_staff else "",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "groups": [g.pk for g in user.groups.all()],
    }
    form.update(changes)
    return {key: value for key, value in form.items() if value != ""}


def test_it_audits_a_user_made_staff_and_given_a_group(staff, alice, admin_user):
    leads = Group.objects.create(name="leads")
    answer = staff.post(
        f"/admin/auth/user/{alice.pk}/change/", change_form(alice, is_staff="on", groups=[leads.pk])
    )
    assert answer.status_code == 302, answer.content[:2000]
    changed = records("user_changed")
    assert [actor for actor, _ in changed] == [admin_user.username] * 2
    assert changed[0][1]["fields"] == {"is_staff": [False, True]}
    assert changed[1][1]["fields"] == {"groups": [[], ["leads"]]}
    assert changed[0][1]["name"] == "alice"
    assert audit.first_broken_record() is None


def test_it_records_a_password_change_without_the_hash(staff, alice, admin_user):
    old_hash = alice.password
    answer = staff.post(
        f"/admin/auth/user/{alice.pk}/password/",
        {
            "password1": "a-new-Passphrase-42",
            "password2": "a-new-Passphrase-42",
            "usable_password": "true",
        },
    )
    assert answer.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a-new-Passphrase-42")
    [(actor, payload)] = records("user_password_changed")
    assert actor == admin_user.username and payload["fields"] == {"usable_password": True}
    every = str(list(AuditRecord.objects.values_list("payload", flat=True)))
    assert alice.password not in every and old_hash not in every


def test_it_records_nothing_for_a_refused_password(staff, alice, admin_user):
    answer = staff.post(
        f"/admin/auth/user/{alice.pk}/password/",
        {"password1": "a-new-Passphrase-42", "password2": "another-one", "usable_password": "true"},
    )
    assert answer.status_code == 200  # the form again, with its error
    assert records("user_password_changed") == []


def test_it_keeps_a_deleted_users_row_and_what_went_with_it(staff, alice, admin_user):
    domain = clinical_notes()
    domain.reviewers.add(alice)
    ApiToken.objects.create(user=alice, key="0" * 64)
    held = gateway_session()
    lifecycle.claim(alice, held.pk)
    decided = gateway_session(ReviewSession.COMPLETED, claimed_by=alice)  # hers, ended
    answer = staff.post(f"/admin/auth/user/{alice.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    assert not User.objects.filter(username="alice").exists()
    [(actor, payload)] = records("user_deleted")
    assert actor == admin_user.username
    assert payload["fields"]["username"] == "alice" and "password" not in payload["fields"]
    assert payload["deleted_with"] == {
        "review_domains": [domain.slug],
        "api_token": True,
        "claims": [held.pk],  # not the ended session she reviewed
    }
    assert decided.pk != held.pk
    assert audit.first_broken_record() is None


def test_it_audits_a_user_created_in_the_admin(staff, admin_user):
    answer = staff.post(
        "/admin/auth/user/add/",
        {
            "username": "dr_new",
            "password1": "a-new-Passphrase-42",
            "password2": "a-new-Passphrase-42",
            "usable_password": "true",
        },
    )
    assert answer.status_code == 302
    [(actor, payload)] = records("user_created")
    assert actor == admin_user.username and payload["name"] == "dr_new"
    assert "password" not in payload["fields"]
