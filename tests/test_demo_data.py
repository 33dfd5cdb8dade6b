import io
import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user
from django.core.management import call_command

from reviewer.demo.credentials import EXAMPLE_MODEL
from reviewer.demo.demo_data import ADMIN_USERNAME, APPLICATION_NAME, REVIEWERS
from reviewer.demo.loading import load_demo_data
from reviewer.lifecycle import application_keys
from reviewer.models import Application, AuditRecord, Domain, GlossaryTerm

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick_hashes(settings):
    """Five demo users per load: a fast hasher keeps the file quick."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_it_loads_four_domains_each_with_ten_or_more_glossary_terms(tmp_path):
    load_demo_data(tmp_path / "creds.json")
    names = set(Domain.objects.values_list("name", flat=True))
    assert names == {"Clinical note", "Contract review", "Underwriting", "Patent claims"}
    for domain in Domain.objects.all():
        assert domain.system_prompt
        assert GlossaryTerm.objects.filter(glossary__domain=domain).count() >= 10


def test_it_is_idempotent_and_keeps_passwords_and_the_application_key(tmp_path):
    first = load_demo_data(tmp_path / "creds.json")
    counts = (Domain.objects.count(), GlossaryTerm.objects.count(), Application.objects.count())
    second = load_demo_data(tmp_path / "creds.json")
    assert second == first
    assert (Domain.objects.count(), GlossaryTerm.objects.count(), Application.objects.count()) == (
        counts
    )
    assert not AuditRecord.objects.filter(action="application_key_rotated").exists()


def test_it_creates_logins_that_work_and_one_admin(tmp_path, client):
    demo = load_demo_data(tmp_path / "creds.json")
    logins = demo["logins"]
    assert set(logins) == {ADMIN_USERNAME, *REVIEWERS.values()}
    for username, password in logins.items():
        answer = client.post("/login/", {"username": username, "password": password})
        assert answer.status_code == 302, username  # through the login page and its throttling
        user = get_user(client)
        assert user.username == username
        assert user.is_staff == (username == ADMIN_USERNAME)
        client.post("/logout/")
    assert json.loads((tmp_path / "creds.json").read_text()) == demo


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


def test_it_makes_each_demo_reviewer_a_member_of_their_domain_only(tmp_path):
    load_demo_data(tmp_path / "creds.json")
    for slug, username in REVIEWERS.items():
        members = Domain.objects.get(slug=slug).reviewers.values_list("username", flat=True)
        assert list(members) == [username]


def test_it_delivers_after_review_except_underwriting_one_sentence_behind(tmp_path):
    load_demo_data(tmp_path / "creds.json")
    modes = dict(Domain.objects.values_list("slug", "delivery_mode"))
    assert modes == {
        "clinical-note": "after_review",
        "contract-review": "after_review",
        "patent-claims": "after_review",
        "underwriting": "delayed",
    }
    assert Domain.objects.get(slug="underwriting").delay_sentences == 1


def test_it_creates_the_demo_application_for_all_four_domains_with_a_key_that_works(tmp_path):
    demo = load_demo_data(tmp_path / "creds.json")
    key = demo["applications"][APPLICATION_NAME]
    app = application_keys.application_for(key)
    assert app is not None and app.name == APPLICATION_NAME
    assert app.domains.count() == 4 == Domain.objects.count()
    assert key not in app.key_digest
    assert oct((tmp_path / "creds.json").stat().st_mode & 0o777) == "0o600"


def test_it_issues_a_new_key_when_the_kept_one_was_lost(tmp_path):
    old = load_demo_data(tmp_path / "creds.json")["applications"][APPLICATION_NAME]
    (tmp_path / "creds.json").unlink()  # a new checkout, the same database
    new = load_demo_data(tmp_path / "creds.json")["applications"][APPLICATION_NAME]
    app = Application.objects.get()
    assert new != old and application_keys.application_for(new) == app
    assert application_keys.application_for(old) is None
    kept = json.loads((tmp_path / "creds.json").read_text())
    assert kept["applications"][APPLICATION_NAME] == new
    assert AuditRecord.objects.filter(action="application_key_rotated", actor="system").exists()


def test_a_revoked_demo_application_stays_revoked(tmp_path):
    load_demo_data(tmp_path / "creds.json")
    app = Application.objects.get()
    application_keys.revoke(app, "admin")
    demo = load_demo_data(tmp_path / "creds.json")
    app.refresh_from_db()
    assert app.revoked_at is not None and demo["applications"] == {}
    assert any("revoked" in note for note in demo["notes"])
    assert not AuditRecord.objects.filter(action="application_key_rotated").exists()


def test_what_an_admin_changed_stands_when_the_demo_loads_again(tmp_path, django_user_model):
    """`make run` loads the demo at every start: it must undo nothing an admin did."""
    from reviewer.models import Glossary, PausePolicy

    first = load_demo_data(tmp_path / "creds.json")
    clinical = Domain.objects.get(slug="clinical-note")
    low = clinical.policies.get(kind="low_confidence")
    low.params = {**low.params, "threshold": 0.05}
    low.save()
    clinical.policies.filter(kind="overconfidence").delete()
    Glossary.objects.filter(domain__slug="contract-review").delete()
    Domain.objects.filter(slug="underwriting").update(delivery_mode="after_review")
    Domain.objects.filter(slug="patent-claims").update(slug="patents")
    clinical.reviewers.clear()
    admin = django_user_model.objects.get(username=ADMIN_USERNAME)
    admin.set_password("changed-by-the-admin-1")
    admin.save()
    django_user_model.objects.filter(username="lawyer_li").update(username="li_w")
    records = AuditRecord.objects.count()

    demo = load_demo_data(tmp_path / "creds.json")
    assert Domain.objects.count() == 4 and Domain.objects.filter(slug="patents").exists()
    assert PausePolicy.objects.get(pk=low.pk).params["threshold"] == 0.05
    assert not clinical.policies.filter(kind="overconfidence").exists()
    assert not Glossary.objects.filter(domain__slug="contract-review").exists()
    assert Domain.objects.get(slug="underwriting").delivery_mode == "after_review"
    assert not clinical.reviewers.exists()
    assert django_user_model.objects.get(username=ADMIN_USERNAME).check_password(
        "changed-by-the-admin-1"
    )
    assert not django_user_model.objects.filter(username="lawyer_li").exists()
    assert AuditRecord.objects.count() == records  # nothing done, nothing to audit
    assert set(demo["logins"]) == set(first["logins"]) - {ADMIN_USERNAME, "lawyer_li"}
    assert sum("changed in the admin" in note for note in demo["notes"]) == 2
    assert demo["applications"] == first["applications"]


def test_the_first_load_leaves_a_domain_an_older_installation_renamed(tmp_path):
    Domain.objects.create(name="Patent claims", slug="patents", specialty="patent")
    load_demo_data(tmp_path / "creds.json")
    assert Domain.objects.count() == 4 and not Domain.objects.filter(slug="patent-claims").exists()
    assert AuditRecord.objects.filter(action="demo_loaded").count() == 1


def test_it_keeps_the_passwords_of_an_older_file_that_held_only_logins(tmp_path):
    (tmp_path / "creds.json").write_text(json.dumps({"dr_chen": "kept-password-1"}))
    demo = load_demo_data(tmp_path / "creds.json")
    assert demo["logins"]["dr_chen"] == "kept-password-1"
    assert demo["applications"][APPLICATION_NAME].startswith("cae_")


def test_seed_demo_prints_the_logins_the_key_and_a_call_to_try(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    text = out.getvalue()
    demo = json.loads((tmp_path / "demo_credentials.json").read_text())
    key = demo["applications"][APPLICATION_NAME]
    assert demo["logins"]["dr_chen"] in text and key in text
    assert "http://127.0.0.1:8000/v1/chat/completions" in text
    assert f"Authorization: Bearer {key}" in text
    model = EXAMPLE_MODEL.removeprefix("caesura:")
    assert f'"model": "{EXAMPLE_MODEL}"' in text and Domain.objects.filter(slug=model).exists()
    quiet = io.StringIO()
    call_command("seed_demo", quiet_logins=True, stdout=quiet)
    assert key not in quiet.getvalue()


def test_make_run_prints_the_same_without_starting_django(tmp_path):
    demo = load_demo_data(tmp_path / "creds.json")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reviewer.demo.credentials",
            str(tmp_path / "creds.json"),
            "http://h:1",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},  # no Django settings: it must not need them
    )
    assert demo["applications"][APPLICATION_NAME] in done.stdout
    assert "curl http://h:1/v1/chat/completions" in done.stdout
    assert "django" not in done.stderr.lower()
