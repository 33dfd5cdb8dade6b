"""Pause policies in the admin: a form per kind, engine validation on the right field, a dry run."""

from __future__ import annotations

import pytest

from inference.policies import POLICY_KINDS
from reviewer.models import PausePolicy
from reviewer.web.policy_forms import param_field_name, policy_form_for

pytestmark = pytest.mark.django_db

VALID_PARAMS = {
    "keyword": {"keywords": "chest pain\n胸痛"},
    "regex": {"pattern": r"\bI\d{2}\b", "flags": "i"},
    "low_confidence": {"threshold": "0.3"},
    "high_entropy": {"threshold": "2.0"},
    "overconfidence": {"threshold": "0.9", "words": "definitely\n毫无疑问", "window_chars": "100"},
    "sentence_count": {"every": "2", "max_pauses": ""},
    "tool_call": {"key": "action"},
    "drift": {
        "window": "6",
        "entropy_threshold": "2.0",
        "similarity_threshold": "0.4",
        "confidence_floor": "0.5",
    },
}


def form_data(domain, kind: str, name: str = "Check", **params) -> dict:
    cls = POLICY_KINDS[kind]
    data = {
        "name": name,
        "domain": domain.pk,
        "action": cls.default_action,
        "enabled": "on",
        "cooldown": "0",
        "order": "0",
    }
    values = {**VALID_PARAMS[kind], **params}
    data.update({param_field_name(key): value for key, value in values.items()})
    return data


def bound_form(domain, kind: str, **overrides):
    data = form_data(domain, kind)
    data.update(overrides)
    return policy_form_for(kind)(data=data)


def test_it_has_a_form_for_every_kind_with_a_field_per_parameter():
    for kind, cls in POLICY_KINDS.items():
        fields = policy_form_for(kind).base_fields
        for name in cls.param_schema():
            assert param_field_name(name) in fields, (kind, name)


@pytest.mark.parametrize("kind", sorted(VALID_PARAMS))
def test_it_validates_and_saves_each_kind(plain_domain, kind):
    form = policy_form_for(kind)(data=form_data(plain_domain, kind, name=f"p-{kind}"))
    assert form.is_valid(), form.errors
    policy = form.save()
    stored = PausePolicy.objects.get(pk=policy.pk)
    assert stored.kind == kind
    assert set(stored.params) == set(POLICY_KINDS[kind].param_schema())
    stored.full_clean()  # what was stored builds in the engine


def test_it_stores_a_string_list_one_item_per_line(plain_domain):
    form = policy_form_for("keyword")(
        data=form_data(plain_domain, "keyword", keywords="  chest pain \n\n胸痛\n")
    )
    assert form.is_valid(), form.errors
    assert form.save().params["keywords"] == ["chest pain", "胸痛"]


def test_it_stores_checkboxes_as_booleans(plain_domain):
    data = form_data(plain_domain, "keyword")
    data[param_field_name("case_sensitive")] = "on"  # whole_word left unchecked
    form = policy_form_for("keyword")(data=data)
    assert form.is_valid(), form.errors
    params = form.save().params
    assert params["case_sensitive"] is True
    assert params["whole_word"] is False


def test_it_refuses_an_invalid_regex_on_the_pattern_field(plain_domain):
    form = bound_form(plain_domain, "regex", param_pattern="(unclosed")
    assert not form.is_valid()
    message = " ".join(form.errors[param_field_name("pattern")])
    assert "invalid regular expression" in message
    assert not form.non_field_errors()


def test_it_refuses_a_catastrophic_regex_with_a_clear_message(plain_domain):
    form = bound_form(plain_domain, "regex", param_pattern="(a+)+$")
    assert not form.is_valid()
    message = " ".join(form.errors[param_field_name("pattern")])
    assert "backtrack catastrophically" in message
    assert "(a+)+" in message
    assert PausePolicy.objects.count() == 0


def test_it_refuses_an_unknown_regex_flag_on_the_flags_field(plain_domain):
    form = bound_form(plain_domain, "regex", param_flags="q")
    assert not form.is_valid()
    assert param_field_name("flags") in form.errors


def test_it_refuses_numbers_out_of_range_on_their_field(plain_domain):
    form = bound_form(plain_domain, "low_confidence", param_threshold="1.5")
    assert not form.is_valid()
    assert param_field_name("threshold") in form.errors
    # An exclusive minimum is the engine's rule: its message lands on the field too.
    form = bound_form(plain_domain, "high_entropy", param_threshold="0")
    assert not form.is_valid()
    assert "> 0.0" in " ".join(form.errors[param_field_name("threshold")])


def test_it_requires_the_required_parameters(plain_domain):
    form = bound_form(plain_domain, "keyword", param_keywords="  \n ")
    assert not form.is_valid()
    assert param_field_name("keywords") in form.errors


def test_it_offers_rollback_only_for_drift(plain_domain):
    for kind in POLICY_KINDS:
        choices = [value for value, _ in policy_form_for(kind)().fields["action"].choices]
        assert ("rollback" in choices) == (kind == "drift"), kind
    form = bound_form(plain_domain, "keyword", action="rollback")
    assert not form.is_valid()
    assert "action" in form.errors
    form = bound_form(plain_domain, "drift", action="rollback")
    assert form.is_valid(), form.errors


def test_it_shows_the_stored_params_when_editing(plain_domain):
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Kw", kind="keyword", params={"keywords": ["a", "b"]}
    )
    form = policy_form_for("keyword")(instance=policy)
    assert form[param_field_name("keywords")].value() in ("a\nb", ["a", "b"])
    assert "a\nb" in str(form[param_field_name("keywords")])


# --- the admin pages ----------------------------------------------------------------------


def test_it_asks_for_the_kind_before_the_form(client, admin_user):
    client.force_login(admin_user)
    page = client.get("/admin/reviewer/pausepolicy/add/").content.decode()
    for kind in POLICY_KINDS:
        assert f"?kind={kind}" in page
    form = client.get("/admin/reviewer/pausepolicy/add/?kind=regex").content.decode()
    assert 'name="param_pattern"' in form
    assert 'name="param_keywords"' not in form


def test_it_adds_a_policy_through_the_admin_and_shows_errors_there(
    client, admin_user, plain_domain
):
    client.force_login(admin_user)
    url = "/admin/reviewer/pausepolicy/add/?kind=regex"
    bad = client.post(url, form_data(plain_domain, "regex", pattern="(a+)+$"))
    assert bad.status_code == 200
    assert "backtrack catastrophically" in bad.content.decode()
    assert not PausePolicy.objects.exists()
    good = client.post(url, form_data(plain_domain, "regex", name="Codes"))
    assert good.status_code == 302, good.content.decode()[:2000]
    policy = PausePolicy.objects.get(name="Codes")
    assert policy.kind == "regex" and policy.params["pattern"] == r"\bI\d{2}\b"
    change = client.get(f"/admin/reviewer/pausepolicy/{policy.pk}/change/").content.decode()
    assert f"/admin/reviewer/pausepolicy/{policy.pk}/try/" in change


def test_it_tries_a_policy_on_sample_text(client, admin_user, plain_domain):
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Pain", kind="keyword", params={"keywords": ["chest pain"]}
    )
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    page = client.post(url, {"text": "He reports chest pain since noon."}).content.decode()
    assert "<mark" in page and "chest pain</mark>" in page
    assert "Keyword &quot;chest pain&quot; appeared" in page
    assert "&#8214; 1" in page
    assert "{&quot;" not in page  # no raw JSON


def test_it_tries_a_policy_within_the_domains_budget_and_lists_what_it_only_flags(
    client, admin_user, plain_domain
):
    plain_domain.min_pause_distance = 50  # the second mention comes sooner: held back
    plain_domain.save()
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Pain", kind="keyword", params={"keywords": ["pain"]}
    )
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    page = client.post(url, {"text": "He reports pain since noon, pain again."}).content.decode()
    assert "Generation would pause once." in page and "&#8214; 2" not in page
    flags = page.split('id="trial-flags"')[1]
    assert "Flagged without pausing" in page and "Pain" in flags and "pain</mark>" in flags


def test_it_says_when_a_policy_cannot_be_tried_on_text(client, admin_user, plain_domain):
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Unsure", kind="low_confidence", params={"threshold": 0.3}
    )
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    page = client.post(url, {"text": "Anything at all."}).content.decode()
    assert "model&#x27;s signals" in page or "model's signals" in page
    assert "Unsure" in page and "<mark" not in page


def test_it_words_dry_run_reasons_as_the_engine_does():
    from django.utils import translation

    from inference.policies import scan_text
    from reviewer.analytics.policy_trial import try_policies

    specs = [
        {"name": "k", "kind": "keyword", "params": {"keywords": ["chest pain", "绝对"]}},
        {"name": "r", "kind": "regex", "params": {"pattern": r"I\d\d"}},
        {"name": "s", "kind": "sentence_count", "params": {"every": 1}},
        {"name": "t", "kind": "tool_call", "params": {"key": "action"}},
    ]
    text = 'Chest pain, code I10. 这绝对是心梗。 {"action": "lookup"} Done.'
    with translation.override("en"):
        reasons = [pause.reason for pause in try_policies(specs, text).pauses]
    engine = [decision.reason for decision in scan_text(specs, text)]
    assert {d.kind for d in scan_text(specs, text)} == {
        "keyword",
        "regex",
        "sentence_count",
        "tool_call",
    }
    assert reasons == engine


def test_it_refuses_a_drift_policy_on_the_vllm_backend(settings, plain_domain):
    settings.CAESURA_BACKEND = "vllm"
    refused = bound_form(plain_domain, "drift")
    assert not refused.is_valid()
    assert "vLLM backend" in str(refused.non_field_errors())
    assert bound_form(plain_domain, "keyword").is_valid()  # what vLLM evaluates is fine
    settings.CAESURA_BACKEND = "transformers"
    assert bound_form(plain_domain, "drift").is_valid()
