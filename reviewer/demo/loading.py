"""Loading the demo data, once per database: `make run` calls it at every start, and what an
admin changed since (a policy, a domain's delivery, a deleted glossary, a password, a revoked
key) must stand. The first load into a database creates what is missing and leaves alone
what exists (an older installation's rows, a domain whose slug an admin changed), and says so
on the audit chain (``demo_loaded``); later loads create and change nothing, except that the
demo application gets a new key (rotated, audited) where the kept one was lost while the
application stays active, so that `make run` has a working key to print."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from reviewer.demo import credentials as credentials_file
from reviewer.demo.credentials import DemoCredentials
from reviewer.demo.demo_data import (
    ADMIN_USERNAME,
    APPLICATION_NAME,
    DELIVERY,
    DOMAINS,
    POLICIES,
    REVIEWERS,
)
from reviewer.lifecycle import application_keys, audit
from reviewer.models import Application, AuditRecord, Domain, Glossary, GlossaryTerm, PausePolicy

SEED_ACTOR = "system"  # how the audit chain names the demo loader
LOADED = "demo_loaded"  # the audit action that marks a database as loaded


@transaction.atomic
def load_demo_data(path: Path) -> DemoCredentials:
    """The demo's domains, users and application, the first time in this database; the logins
    and the application's key that still work are kept in ``path`` (created on first run)."""
    kept = credentials_file.read(path)
    kept_key = kept["applications"].get(APPLICATION_NAME, "")
    if not AuditRecord.objects.filter(action=LOADED).exists():
        kept_key = load_once(kept["logins"]) or kept_key
    logins, notes = working_logins(kept["logins"])
    key, note = demo_application_key(kept_key)
    result: DemoCredentials = {
        "logins": logins,
        "applications": {APPLICATION_NAME: key} if key else {},
        "notes": notes + ([note] if note else []),
    }
    credentials_file.write(path, result)
    return result


def load_once(passwords: dict[str, str]) -> str:
    """What is missing of the demo; existing rows stay as they are. ``passwords``: the kept
    ones (a database made anew gets the logins printed before), new ones added to it. The
    demo application's key where it was created now."""
    created = [spec["slug"] for spec in DOMAINS if load_domain(spec)]
    users = [u for u in demo_usernames() if _create_user(u, passwords, u == ADMIN_USERNAME)]
    for slug, username in REVIEWERS.items():  # a membership only where one side is new
        domain = Domain.objects.filter(slug=slug).first()
        user = get_user_model().objects.filter(username=username).first()
        if domain and user and (slug in created or username in users):
            domain.reviewers.add(user)
    key = ""
    if not Application.objects.filter(name=APPLICATION_NAME).exists():
        domains = Domain.objects.filter(slug__in=[spec["slug"] for spec in DOMAINS])
        _, key = application_keys.create(APPLICATION_NAME, domains, SEED_ACTOR)
    payload = {"domains": created, "users": users, "application_created": bool(key)}
    audit.append(LOADED, SEED_ACTOR, payload=payload)
    return key


def load_domain(spec: dict[str, Any]) -> bool:
    """The domain with its glossary and policies, unless a domain of its slug or name exists
    (an admin may have renamed either): whether it was created."""
    if Domain.objects.filter(Q(slug=spec["slug"]) | Q(name=spec["name"])).exists():
        return False
    domain = Domain.objects.create(
        slug=spec["slug"],
        name=spec["name"],
        name_zh=spec.get("name_zh", ""),
        specialty=spec["specialty"],
        system_prompt=spec["system_prompt"],
        **DELIVERY.get(spec["slug"], {"delivery_mode": "after_review"}),
    )
    glossary = Glossary.objects.create(domain=domain, name=spec["glossary"])
    GlossaryTerm.objects.bulk_create(
        GlossaryTerm(glossary=glossary, term=term, preferred=preferred, code=code, note=note)
        for term, preferred, code, note in spec["terms"]
    )
    for order, policy in enumerate(POLICIES.get(domain.slug, [])):
        load_policy(domain, order, policy)
    return True


def load_policy(domain: Domain, order: int, spec: dict[str, Any]) -> PausePolicy:
    policy = PausePolicy(
        domain=domain,
        name=spec["name"],
        name_zh=spec.get("name_zh", ""),
        kind=spec["kind"],
        params=spec["params"],
        action=spec.get("action", "pause"),
        cooldown=spec.get("cooldown", 0),
        order=order,
    )
    policy.full_clean()  # the engine's own policy classes validate the parameters
    policy.save()
    return policy


def demo_usernames() -> list[str]:
    return [ADMIN_USERNAME, *REVIEWERS.values()]


def working_logins(kept: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The demo logins whose kept password still works; a note for each that does not."""
    logins, notes = {}, []
    for username in demo_usernames():
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is not None and username in kept and user.check_password(kept[username]):
            logins[username] = kept[username]
        else:
            notes.append(f"{username}: changed in the admin since the demo was loaded; not shown")
    return logins, notes


def demo_application_key(kept_key: str) -> tuple[str, str]:
    """The demo application's working key: the kept one, else a new one where the application
    is still active (the kept key was lost: a new file, a rotation). An application an admin
    revoked or deleted stays so: no key, and a note that says why."""
    app = Application.objects.filter(name=APPLICATION_NAME).first()
    if app is None:
        return "", f"{APPLICATION_NAME}: deleted in the admin; no key to show"
    if app.revoked_at is not None:
        return "", f"{APPLICATION_NAME}: revoked in the admin; no key to show"
    if kept_key and application_keys.application_for(kept_key) == app:
        return kept_key, ""
    return application_keys.rotate(app, SEED_ACTOR), ""


def _create_user(username: str, passwords: dict[str, str], is_admin: bool) -> bool:
    """The demo user, unless one of that name exists (its password and rights stay): whether
    it was created. Passwords are random per installation and kept in an untracked file."""
    if get_user_model().objects.filter(username=username).exists():
        return False
    password = passwords.setdefault(username, secrets.token_urlsafe(9))
    get_user_model().objects.create_user(
        username, password=password, is_staff=is_admin, is_superuser=is_admin
    )
    return True
