"""What an admin changes in policies, domains, glossaries and ROI settings is in the audit
chain: who, which fields, from what to what (the list page's inline edits and the inline rows
too); a save that changes nothing writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from reviewer.lifecycle import audit
from reviewer.models import AuditRecord, Glossary, GlossaryTerm, PausePolicy

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def policy(plain_domain) -> PausePolicy:
    return PausePolicy.objects.create(
        domain=plain_domain, name="Unsure", kind="low_confidence", params={"threshold": 0.3}
    )


def as_posted(value: Any) -> Any:
    if value is True:
        return "on"
    if value is None or value is False:
        return ""
    return (
        [str(v.pk if hasattr(v, "pk") else v) for v in value] if isinstance(value, list) else value
    )


def form_values(form: Any) -> dict[str, Any]:
    """What the browser would send back for ``form`` untouched (an unticked box: nothing)."""
    values = {}
    for name in form.fields:
        value = form[name].value()
        if value is not False:
            values[form.add_prefix(name)] = as_posted(value)
    return values


def page_as_posted(client, url: str) -> dict[str, Any]:
    """The admin change page's whole form, its inlines included, as a browser would post it."""
    context = client.get(url).context
    data = form_values(context["adminform"].form)
    for inline in context["inline_admin_formsets"]:
        formset = inline.formset
        data.update(form_values(formset.management_form))
        for form in formset.forms:
            data.update(form_values(form))
    return data


def actions() -> list[tuple[str, str, dict]]:
    rows = AuditRecord.objects.order_by("id").values_list("action", "actor", "payload")
    return [row for row in rows if not row[0].startswith("api_token")]


def test_it_audits_a_policys_changed_fields_and_nothing_for_a_save_that_changes_nothing(
    staff, policy, admin_user
):
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/change/"
    data = page_as_posted(staff, url)
    assert staff.post(url, data).status_code == 302
    assert actions() == []  # saved as it was
    data["param_threshold"] = "0.45"
    assert staff.post(url, data).status_code == 302
    [(action, actor, payload)] = actions()
    assert (action, actor, payload["id"]) == ("pausepolicy_changed", admin_user.username, policy.pk)
    assert payload["name"] == str(policy)  # "Plain: Unsure (low_confidence)"
    assert payload["fields"] == {"params": [{"threshold": 0.3}, {"threshold": 0.45}]}
    assert audit.first_broken_record() is None


def test_it_audits_a_policy_switched_off_on_the_list_page_and_one_deleted(staff, policy):
    listing = staff.get("/admin/reviewer/pausepolicy/").context["cl"].formset
    data = {**form_values(listing.management_form), "_save": "Save"}
    for form in listing.forms:
        data.update(form_values(form))
    data.pop(listing.forms[0].add_prefix("enabled"))  # unticked
    assert staff.post("/admin/reviewer/pausepolicy/", data).status_code == 302
    assert actions()[-1][2]["fields"] == {"enabled": [True, False]}

    url = f"/admin/reviewer/pausepolicy/{policy.pk}/delete/"
    assert staff.post(url, {"post": "yes"}).status_code == 302
    action, _, payload = actions()[-1]
    assert action == "pausepolicy_deleted" and payload["id"] == policy.pk
    assert payload["fields"]["params"] == {"threshold": 0.3}


def test_it_audits_a_domains_prompt_once_and_its_delivery_in_its_own_words(staff, plain_domain):
    url = f"/admin/reviewer/domain/{plain_domain.pk}/change/"
    data = page_as_posted(staff, url)
    data["system_prompt"] = "Answer in one sentence."
    data["delivery_mode"] = "delayed"
    assert staff.post(url, data).status_code == 302
    found = {action: payload for action, _, payload in actions()}
    assert set(found) == {"domain_changed", "domain_delivery_changed"}
    assert list(found["domain_changed"]["fields"]) == ["system_prompt"]  # delivery: once


def test_it_audits_a_glossarys_term_rows_and_an_import(staff, plain_domain):
    glossary = Glossary.objects.create(domain=plain_domain, name="Cardiology")
    term = GlossaryTerm.objects.create(glossary=glossary, term="heart attack", preferred="MI")
    url = f"/admin/reviewer/glossary/{glossary.pk}/change/"
    data = page_as_posted(staff, url)
    prefix = next(k for k, v in data.items() if k.endswith("-0-term") and v == "heart attack")
    data[prefix.replace("-term", "-preferred")] = "acute myocardial infarction"
    assert staff.post(url, data).status_code == 302
    [(action, _, payload)] = actions()
    assert (action, payload["id"]) == ("glossaryterm_changed", term.pk)
    assert payload["fields"] == {"preferred": ["MI", "acute myocardial infarction"]}

    upload = SimpleUploadedFile("t.csv", b"term,preferred\nstroke,CVA\n", content_type="text/csv")
    staff.post(f"/admin/reviewer/glossary/{glossary.pk}/import/", {"file": upload})
    action, _, payload = actions()[-1]
    assert (action, payload["created"], payload["updated"]) == ("glossary_imported", 1, 0)
    assert audit.first_broken_record() is None
