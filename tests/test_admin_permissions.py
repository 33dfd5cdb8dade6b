"""Admin actions that hand over or cut off an identity need more than the right to look:
Django lets anyone who may view a list run its actions unless they ask for a permission. And
every way a key is issued or removed is on the audit chain."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client, RequestFactory

from reviewer.lifecycle import application_keys
from reviewer.models import ApiToken, AuditRecord, TaskClassifierVersion
from reviewer.web.auth import issue_token
from tests.session_factory import clinical_notes

pytestmark = pytest.mark.django_db

LIST = "/admin/reviewer/application/"
KEY = re.compile(r"cae_[A-Za-z0-9_-]{20,}")  # a whole key; the list shows its prefix


def staff_with(django_user_model, *codenames: str):
    user = django_user_model.objects.create_user("viewer", password="viewer-pass-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return user, client


@pytest.mark.parametrize("action", ["rotate_keys", "revoke"])
def test_it_lets_no_viewer_rotate_or_revoke_an_applications_key(django_user_model, action):
    app, key = application_keys.create("drafter", [clinical_notes()], "root")
    before = list(AuditRecord.objects.values_list("pk", flat=True))
    _, client = staff_with(django_user_model, "view_application")
    answer = client.post(LIST, {"action": action, "_selected_action": [app.pk]}, follow=True)
    assert answer.status_code == 200 and not KEY.search(answer.content.decode())
    app.refresh_from_db()
    assert application_keys.application_for(key) == app and app.revoked_at is None
    assert list(AuditRecord.objects.values_list("pk", flat=True)) == before


def test_it_lets_staff_who_may_change_rotate_a_key(django_user_model):
    app, key = application_keys.create("drafter", [clinical_notes()], "root")
    _, client = staff_with(django_user_model, "view_application", "change_application")
    answer = client.post(LIST, {"action": "rotate_keys", "_selected_action": [app.pk]}, follow=True)
    assert KEY.search(answer.content.decode())
    assert application_keys.application_for(key) is None  # the old key stopped working


def test_it_offers_the_classifier_switch_only_to_who_may_change_it(django_user_model, admin_user):
    model_admin = admin.site._registry[TaskClassifierVersion]
    viewer, _ = staff_with(django_user_model, "view_taskclassifierversion")
    request = RequestFactory().get("/admin/reviewer/taskclassifierversion/")
    request.user = viewer
    assert not {"enable", "disable"} & set(model_admin.get_actions(request))
    request.user = admin_user
    assert {"enable", "disable"} <= set(model_admin.get_actions(request))


def test_it_audits_a_token_made_over_the_api(alice):
    key = issue_token(alice)
    client = Client(headers={"Authorization": f"Token {key}"})
    answer = client.post("/api/token")
    assert answer.status_code == 201
    issued = AuditRecord.objects.filter(action="api_token_issued").order_by("pk")
    assert [(r.actor, r.payload) for r in issued] == [("alice", {"user": "alice"})] * 2


def test_it_audits_a_token_made_on_the_command_line(alice, capsys):
    call_command("create_api_token", "alice")
    assert capsys.readouterr().out.strip()
    record = AuditRecord.objects.get(action="api_token_issued")
    assert (record.actor, record.payload) == ("create_api_token", {"user": "alice"})


def test_it_audits_a_token_deleted_in_the_admin(alice, admin_user):
    issue_token(alice)
    client = Client()
    client.force_login(admin_user)
    token = ApiToken.objects.get(user=alice)
    client.post(f"/admin/reviewer/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert not ApiToken.objects.filter(user=alice).exists()
    record = AuditRecord.objects.get(action="api_token_deleted")
    assert (record.actor, record.payload) == (admin_user.username, {"user": "alice"})


def test_it_lets_staff_delete_only_their_own_token(django_user_model, alice):
    issue_token(alice)
    viewer, client = staff_with(django_user_model, "view_apitoken", "delete_apitoken")
    issue_token(viewer)
    theirs, own = ApiToken.objects.get(user=alice), ApiToken.objects.get(user=viewer)
    answer = client.post(f"/admin/reviewer/apitoken/{theirs.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [theirs.pk, own.pk], "post": "yes"}
    client.post("/admin/reviewer/apitoken/", bulk, follow=True)
    assert (
        ApiToken.objects.filter(user=alice).exists()
        and ApiToken.objects.filter(user=viewer).exists()
    )
    assert not AuditRecord.objects.filter(action="api_token_deleted").exists()
    client.post(f"/admin/reviewer/apitoken/{own.pk}/delete/", {"post": "yes"})
    assert not ApiToken.objects.filter(user=viewer).exists()
