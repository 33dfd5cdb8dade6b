"""The admin of applications and of domains' review floor: a key is shown once on the next page
and kept only as a digest; rotate and revoke are actions; every change is audited, the admin
user as the actor."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from reviewer.lifecycle import application_keys
from reviewer.models import Application, AuditRecord, Domain

pytestmark = pytest.mark.django_db

KEY = re.compile(r"cae_[A-Za-z0-9_-]{20,}")
ADD = "/admin/reviewer/application/add/"
LIST = "/admin/reviewer/application/"


@pytest.fixture
def admin_client_(client: Client, admin_user) -> Client:
    client.force_login(admin_user)
    return client


@pytest.fixture
def contract() -> Domain:
    return Domain.objects.create(
        name="Contract", slug="contract", specialty="legal", system_prompt="You draft contracts."
    )


def new_application(client: Client, domains: list[Domain], **extra: Any):
    data = {
        "name": "Note drafter",
        "domains": [d.pk for d in domains],
        "max_concurrent": 4,
        "requests_per_minute": 60,
        "_save": "Save",
        **extra,
    }
    return client.post(ADD, data, follow=True)


def shown_keys(response) -> list[str]:
    return KEY.findall(response.content.decode())


def actions() -> list[str]:
    return list(AuditRecord.objects.values_list("action", flat=True))


def test_it_creates_an_application_and_shows_its_key_once(admin_client_, plain_domain, contract):
    response = new_application(admin_client_, [plain_domain, contract])
    assert response.status_code == 200
    [key] = set(shown_keys(response))
    app = Application.objects.get()
    assert application_keys.application_for(key) == app
    assert sorted(app.domains.values_list("slug", flat=True)) == ["contract", "plain"]
    assert key not in admin_client_.get(LIST).content.decode()  # once
    assert key not in admin_client_.get(f"{LIST}{app.pk}/change/").content.decode()
    stored = [app.key_digest, app.key_prefix, *map(str, AuditRecord.objects.values("payload"))]
    stored += [entry.change_message for entry in LogEntry.objects.all()]
    assert not any(key in text for text in stored)
    record = AuditRecord.objects.get()
    assert (record.action, record.actor) == ("application_created", "root")
    assert record.payload["domains"] == ["contract", "plain"]


def test_it_refuses_bad_limits_and_changes_nothing(admin_client_, plain_domain):
    response = new_application(admin_client_, [plain_domain], requests_per_minute=0)
    assert response.status_code == 200 and b"errornote" in response.content
    assert not shown_keys(response)
    assert not Application.objects.exists() and not AuditRecord.objects.exists()


def test_it_rotates_a_key_showing_the_new_one_once_and_stops_the_old(admin_client_, plain_domain):
    app, old = application_keys.create("Note drafter", [plain_domain], "root")
    response = admin_client_.post(
        LIST, {"action": "rotate_keys", "_selected_action": [app.pk]}, follow=True
    )
    [new] = set(shown_keys(response))
    assert new != old
    assert application_keys.application_for(old) is None
    assert application_keys.application_for(new) == app
    assert new not in admin_client_.get(LIST).content.decode()
    record = AuditRecord.objects.last()
    assert (record.action, record.actor) == ("application_key_rotated", "root")


def test_it_revokes_a_key(admin_client_, plain_domain):
    app, key = application_keys.create("Note drafter", [plain_domain], "root")
    admin_client_.post(LIST, {"action": "revoke", "_selected_action": [app.pk]}, follow=True)
    assert application_keys.application_for(key) is None
    assert actions() == ["application_created", "application_revoked"]
    admin_client_.post(LIST, {"action": "revoke", "_selected_action": [app.pk]}, follow=True)
    assert actions() == ["application_created", "application_revoked"]  # once
    assert admin_client_.post(f"{LIST}{app.pk}/delete/", {"post": "yes"}).status_code == 403
    # A new key for a revoked application makes it active again: the admin is told so.
    page = admin_client_.post(
        LIST, {"action": "rotate_keys", "_selected_action": [app.pk]}, follow=True
    ).content.decode()
    assert "Note drafter was revoked; with its new key it is active again" in page
    assert AuditRecord.objects.last().payload == {
        "application": "Note drafter",
        "reactivated": True,
    }


def test_it_audits_a_change_of_domains_and_limits_with_before_and_after(
    admin_client_, plain_domain, contract
):
    app, key = application_keys.create("Note drafter", [plain_domain], "root")
    data = {"name": "Note drafter", "domains": [contract.pk], "max_concurrent": 2}
    response = admin_client_.post(
        f"{LIST}{app.pk}/change/", {**data, "requests_per_minute": 60, "_save": "Save"}
    )
    assert response.status_code == 302
    record = AuditRecord.objects.last()
    assert (record.action, record.actor) == ("application_changed", "root")
    assert record.payload["changes"] == {
        "domains": [["plain"], ["contract"]],
        "max_concurrent": [4, 2],
    }
    assert application_keys.application_for(key) == app  # the key is untouched


def domain_form(domain: Domain, **changes: Any) -> dict[str, Any]:
    fields = ["name", "name_zh", "slug", "specialty", "system_prompt", "max_pauses_per_100_tokens"]
    fields += ["min_pause_distance", "resume_time_after_s", "delivery_mode", "delay_sentences"]
    fields += ["max_wait_s", "claim_minutes", "review_sla_minutes", "attention", "gate_sinks"]
    fields += ["gate_window", "gate_top_k", "gate_wide_top_k", "recall_words_en", "recall_words_zh"]
    data: dict[str, Any] = {name: getattr(domain, name) for name in fields}
    data["decoding"] = "{}"
    data["reviewers"] = list(domain.reviewers.values_list("pk", flat=True))
    if domain.auto_approve_unpaused:
        data["auto_approve_unpaused"] = "on"
    return {**data, **changes, "_save": "Save"}


def test_it_audits_a_change_of_delivery_mode_and_of_reviewers(
    admin_client_, plain_domain, alice, bob
):
    url = f"/admin/reviewer/domain/{plain_domain.pk}/change/"
    page = admin_client_.get(url).content.decode()
    assert 'name="delivery_mode"' in page and 'data-field-name="reviewers"' in page
    form = domain_form(plain_domain, delivery_mode="delayed", reviewers=[alice.pk, bob.pk])
    assert admin_client_.post(url, form).status_code == 302
    plain_domain.refresh_from_db()
    assert plain_domain.delivery_mode == "delayed"
    assert set(plain_domain.reviewers.all()) == {alice, bob}
    delivery = AuditRecord.objects.get(action="domain_delivery_changed")
    assert delivery.actor == "root"
    assert delivery.payload["before"]["delivery_mode"] == "after_review"
    assert delivery.payload["after"]["delivery_mode"] == "delayed"
    members = AuditRecord.objects.get(action="domain_reviewers_changed")
    assert members.payload["before"] == [] and members.payload["after"] == ["alice", "bob"]
    assert admin_client_.post(url, domain_form(plain_domain)).status_code == 302
    assert AuditRecord.objects.count() == 2  # saving without a change audits nothing


def test_it_refuses_a_delay_beyond_three_sentences_and_changes_nothing(admin_client_, plain_domain):
    url = f"/admin/reviewer/domain/{plain_domain.pk}/change/"
    form = domain_form(plain_domain, delivery_mode="delayed", delay_sentences=4)
    assert admin_client_.post(url, form).status_code == 200
    plain_domain.refresh_from_db()
    assert plain_domain.delivery_mode == "after_review" and not AuditRecord.objects.exists()


@pytest.mark.parametrize(
    ("decoding", "words"),
    [
        ("[1, 2]", "A JSON object of sampling parameters"),  # every start was a 500
        ('{"temperature": 0.7, "foo": 1}', "unknown sampling parameter(s): foo"),
        ('{"temperature": -3}', "temperature"),
    ],
)
def test_it_refuses_a_domains_decoding_that_every_session_would_trip_on(
    admin_client_, plain_domain, decoding, words
):
    url = f"/admin/reviewer/domain/{plain_domain.pk}/change/"
    answer = admin_client_.post(url, domain_form(plain_domain, decoding=decoding))
    assert answer.status_code == 200 and words in answer.content.decode().replace("&quot;", '"')
    plain_domain.refresh_from_db()
    assert plain_domain.decoding == {}
    good = domain_form(plain_domain, decoding='{"temperature": 0.5}')
    assert admin_client_.post(url, good).status_code == 302
