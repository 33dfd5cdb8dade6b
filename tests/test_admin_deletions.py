"""A deletion in the admin keeps, in its ``<model>_deleted`` record, what went with the row:
a glossary's terms; a domain's own columns (delivery and attention included), its reviewers,
policies, glossaries with their term counts, ROI settings, presets, learned pause models and
the applications bound to it. The record is written in the deletion's transaction: a deletion
that fails leaves no record of it."""

from __future__ import annotations

import pytest
from django.contrib import admin

from reviewer.lifecycle import audit
from reviewer.models import (
    Application,
    AuditRecord,
    Domain,
    Glossary,
    GlossaryTerm,
    PauseModelVersion,
    PausePolicy,
    RoiSettings,
    TaskDecoding,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, admin_user):
    client.force_login(admin_user)
    return client


def deleted(model: str) -> list[tuple[str, dict]]:
    rows = AuditRecord.objects.filter(action=f"{model}_deleted").order_by("id")
    return list(rows.values_list("actor", "payload"))


@pytest.fixture
def glossary(plain_domain) -> Glossary:
    glossary = plain_domain.glossaries.get()  # "Terms", with high blood pressure → I10
    GlossaryTerm.objects.create(
        glossary=glossary, term="heart attack", preferred="MI", note="acute only"
    )
    return glossary


@pytest.fixture
def furnished(plain_domain, alice, bob) -> Domain:
    """The plain domain with everything that goes when it is deleted."""
    Domain.objects.filter(pk=plain_domain.pk).update(
        delivery_mode="delayed", delay_sentences=2, attention="gated", gate_window=128
    )
    plain_domain.refresh_from_db()
    plain_domain.reviewers.add(alice, bob)
    PausePolicy.objects.create(
        domain=plain_domain, name="Unsure", kind="low_confidence", params={"threshold": 0.3}
    )
    PausePolicy.objects.create(
        domain=plain_domain, name="Dose", kind="keyword", params={"words": ["mg"]}, order=1
    )
    Glossary.objects.create(domain=plain_domain, name="Empty")
    RoiSettings.objects.create(domain=plain_domain, minutes_saved_per_cycle=12.5)
    TaskDecoding.objects.create(domain=plain_domain, task_type="open", params={"temperature": 0.9})
    PauseModelVersion.objects.create(
        domain=plain_domain, version=1, checksum="c" * 64, data=b"model", created_by="root"
    )
    app = Application.objects.create(name="Note drafter", key_digest="0" * 64, key_prefix="cae_t")
    app.domains.add(plain_domain)
    return plain_domain


def test_a_glossarys_deletion_keeps_its_terms(staff, glossary, admin_user):
    terms = {t.term: t.pk for t in glossary.terms.all()}
    url = f"/admin/reviewer/glossary/{glossary.pk}/delete/"
    assert staff.post(url, {"post": "yes"}).status_code == 302
    assert not GlossaryTerm.objects.filter(pk__in=terms.values()).exists()
    [(actor, payload)] = deleted("glossary")
    assert actor == admin_user.username
    assert (payload["id"], payload["name"]) == (glossary.pk, "Plain: Terms")
    assert payload["fields"] == {"id": glossary.pk, "domain": glossary.domain_id, "name": "Terms"}
    assert payload["deleted_with"]["terms"] == [
        {
            "id": terms["high blood pressure"],
            "term": "high blood pressure",
            "preferred": "essential (primary) hypertension",
            "code": "I10",
            "note": "",
        },
        {
            "id": terms["heart attack"],
            "term": "heart attack",
            "preferred": "MI",
            "code": "",
            "note": "acute only",
        },
    ]
    assert audit.first_broken_record() is None


def test_a_domains_deletion_keeps_its_fields_and_everything_that_went_with_it(
    staff, furnished, admin_user
):
    domain = furnished
    policies = list(domain.policies.order_by("order", "id"))
    terms_glossary = domain.glossaries.get(name="Terms")
    url = f"/admin/reviewer/domain/{domain.pk}/delete/"
    assert staff.post(url, {"post": "yes"}).status_code == 302
    assert not Domain.objects.filter(pk=domain.pk).exists()

    [(actor, payload)] = deleted("domain")
    assert actor == admin_user.username and payload["id"] == domain.pk
    fields = payload["fields"]
    assert (fields["name"], fields["slug"], fields["system_prompt"]) == (
        "Plain",
        "plain",
        "You are a clinical documentation assistant.",
    )
    # delivery and attention, which a change audits in their own records, are kept here
    assert (fields["delivery_mode"], fields["delay_sentences"]) == ("delayed", 2)
    assert (fields["attention"], fields["gate_window"]) == ("gated", 128)
    assert fields["claim_minutes"] == 10 and fields["reviewers"] == ["alice", "bob"]

    went = payload["deleted_with"]
    assert [(p["id"], p["name"], p["kind"]) for p in went["policies"]] == [
        (policies[0].pk, "Unsure", "low_confidence"),
        (policies[1].pk, "Dose", "keyword"),
    ]
    assert went["policies"][0]["params"] == {"threshold": 0.3}
    assert went["glossaries"] == [
        {"id": domain_glossary_id(went, "Empty"), "name": "Empty", "terms": 0},
        {"id": terms_glossary.pk, "name": "Terms", "terms": 1},
    ]
    assert went["roi_settings"]["minutes_saved_per_cycle"] == 12.5
    assert [(p["task_type"], p["params"]) for p in went["task_decodings"]] == [
        ("open", {"temperature": 0.9})
    ]
    assert [(m["version"], m["checksum"]) for m in went["pause_models"]] == [(1, "c" * 64)]
    assert [a["name"] for a in went["applications"]] == ["Note drafter"]
    assert Application.objects.get(name="Note drafter").domains.count() == 0
    assert audit.first_broken_record() is None


def domain_glossary_id(went: dict, name: str) -> int:
    return next(g["id"] for g in went["glossaries"] if g["name"] == name)


def test_a_domain_deleted_from_the_list_keeps_the_same(staff, furnished):
    data = {"action": "delete_selected", "_selected_action": [furnished.pk], "post": "yes"}
    assert staff.post("/admin/reviewer/domain/", data).status_code == 302
    assert not Domain.objects.filter(pk=furnished.pk).exists()
    [(_, payload)] = deleted("domain")
    assert payload["fields"]["reviewers"] == ["alice", "bob"]
    assert [g["name"] for g in payload["deleted_with"]["glossaries"]] == ["Empty", "Terms"]


def test_a_domain_without_anything_attached_says_so(staff):
    bare = Domain.objects.create(name="Bare", slug="bare", specialty="legal", system_prompt="Hi.")
    assert staff.post(f"/admin/reviewer/domain/{bare.pk}/delete/", {"post": "yes"}).status_code
    [(_, payload)] = deleted("domain")
    assert payload["fields"]["reviewers"] == []
    assert payload["deleted_with"] == {
        "policies": [],
        "glossaries": [],
        "roi_settings": None,
        "task_decodings": [],
        "pause_models": [],
        "applications": [],
    }


def test_a_policys_deletion_keeps_every_column(staff, plain_domain):
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Unsure", kind="low_confidence", params={"threshold": 0.3}
    )
    data = {"action": "delete_selected", "_selected_action": [policy.pk], "post": "yes"}
    assert staff.post("/admin/reviewer/pausepolicy/", data).status_code == 302
    [(_, payload)] = deleted("pausepolicy")
    assert payload["fields"]["params"] == {"threshold": 0.3}
    assert "deleted_with" not in payload  # nothing goes with a policy


def test_a_deletion_that_fails_leaves_no_record_of_it(staff, glossary, monkeypatch):
    """The list's delete action runs outside the admin's own transaction: the record and
    the deletion share one of their own."""

    def fails(self, request, queryset):
        raise RuntimeError("the database refused")

    monkeypatch.setattr(admin.ModelAdmin, "delete_queryset", fails)
    data = {"action": "delete_selected", "_selected_action": [glossary.pk], "post": "yes"}
    with pytest.raises(RuntimeError):
        staff.post("/admin/reviewer/glossary/", data)
    assert deleted("glossary") == []
    assert Glossary.objects.filter(pk=glossary.pk).exists()
