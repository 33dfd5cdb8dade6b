import json

import pytest
from django.contrib.auth import get_user

from reviewer.demo.demo_data import ADMIN_USERNAME, REVIEWERS
from reviewer.demo.loading import load_demo_data
from reviewer.models import Domain, GlossaryTerm

pytestmark = pytest.mark.django_db


def test_it_loads_four_domains_each_with_ten_or_more_glossary_terms(tmp_path):
    load_demo_data(tmp_path / "creds.json")
    names = set(Domain.objects.values_list("name", flat=True))
    assert names == {"Clinical note", "Contract review", "Underwriting", "Patent claims"}
    for domain in Domain.objects.all():
        assert domain.system_prompt
        assert GlossaryTerm.objects.filter(glossary__domain=domain).count() >= 10


def test_it_is_idempotent_and_keeps_passwords(tmp_path):
    first = load_demo_data(tmp_path / "creds.json")
    counts = (Domain.objects.count(), GlossaryTerm.objects.count())
    second = load_demo_data(tmp_path / "creds.json")
    assert second == first
    assert (Domain.objects.count(), GlossaryTerm.objects.count()) == counts


def test_it_creates_logins_that_work_and_one_admin(tmp_path, client):
    logins = load_demo_data(tmp_path / "creds.json")
    assert set(logins) == {ADMIN_USERNAME, *REVIEWERS.values()}
    for username, password in logins.items():
        answer = client.post("/login/", {"username": username, "password": password})
        assert answer.status_code == 302, username  # through the login page and its throttling
        user = get_user(client)
        assert user.username == username
        assert user.is_staff == (username == ADMIN_USERNAME)
        client.post("/logout/")
    assert json.loads((tmp_path / "creds.json").read_text()) == logins


def test_it_gives_every_demo_domain_valid_pause_policies(tmp_path):
    from inference.policies import build_policy

    load_demo_data(tmp_path / "creds.json")
    for domain in Domain.objects.all():
        policies = list(domain.policies.all())
        assert policies, domain.name
        for policy in policies:
            build_policy(policy.to_spec())
    kinds = set(Domain.objects.get(slug="clinical-note").policies.values_list("kind", flat=True))
    assert kinds == {"keyword", "low_confidence", "overconfidence"}


def test_it_names_every_demo_domain_and_policy_in_chinese_too(tmp_path):
    from django.utils import translation

    from reviewer.models import PausePolicy

    load_demo_data(tmp_path / "creds.json")
    assert all(d.name_zh for d in Domain.objects.all())
    assert all(p.name_zh for p in PausePolicy.objects.all())
    clinical = Domain.objects.get(slug="clinical-note")
    with translation.override("zh-hans"):
        assert clinical.display_name == "临床病历"
    with translation.override("en"):
        assert clinical.display_name == "Clinical note"


def test_the_admin_edits_the_chinese_names(tmp_path, client, admin_user):
    load_demo_data(tmp_path / "creds.json")
    client.force_login(admin_user)
    domain = Domain.objects.get(slug="clinical-note")
    assert (
        'name="name_zh"'
        in client.get(f"/admin/reviewer/domain/{domain.pk}/change/").content.decode()
    )
    policy = domain.policies.first()
    page = client.get(f"/admin/reviewer/pausepolicy/{policy.pk}/change/").content.decode()
    assert 'name="name_zh"' in page and policy.name_zh in page
