"""Loading the demo data: idempotent, so `make run` may call it every time."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

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
from reviewer.lifecycle import application_keys
from reviewer.models import Application, Domain, Glossary, GlossaryTerm, PausePolicy

SEED_ACTOR = "system"  # how the audit chain names the demo loader


@transaction.atomic
def load_demo_data(path: Path) -> DemoCredentials:
    """Domains, their reviewers, the demo users and the demo application; the logins and the
    application's key are kept in ``path`` (created on first run, kept afterwards)."""
    for spec in DOMAINS:
        load_domain(spec)
    kept = credentials_file.read(path)
    logins = ensure_demo_users(kept["logins"])
    for slug, username in REVIEWERS.items():
        Domain.objects.get(slug=slug).reviewers.add(get_user_model().objects.get(username=username))
    key = ensure_demo_application(kept["applications"].get(APPLICATION_NAME, ""))
    result: DemoCredentials = {"logins": logins, "applications": {APPLICATION_NAME: key}}
    credentials_file.write(path, result)
    return result


def load_domain(spec: dict[str, Any]) -> Domain:
    domain, _ = Domain.objects.update_or_create(
        slug=spec["slug"],
        defaults={
            "name": spec["name"],
            "name_zh": spec.get("name_zh", ""),
            "specialty": spec["specialty"],
            "system_prompt": spec["system_prompt"],
            **DELIVERY.get(spec["slug"], {"delivery_mode": "after_review"}),
        },
    )
    glossary, _ = Glossary.objects.get_or_create(domain=domain, name=spec["glossary"])
    for term, preferred, code, note in spec["terms"]:
        GlossaryTerm.objects.update_or_create(
            glossary=glossary,
            term=term,
            defaults={"preferred": preferred, "code": code, "note": note},
        )
    for order, policy in enumerate(POLICIES.get(domain.slug, [])):
        load_policy(domain, order, policy)
    return domain


def load_policy(domain: Domain, order: int, spec: dict[str, Any]) -> PausePolicy:
    policy, _ = PausePolicy.objects.update_or_create(
        domain=domain,
        name=spec["name"],
        defaults={
            "name_zh": spec.get("name_zh", ""),
            "kind": spec["kind"],
            "params": spec["params"],
            "action": spec.get("action", "pause"),
            "cooldown": spec.get("cooldown", 0),
            "order": order,
        },
    )
    policy.full_clean()  # the engine's own policy classes validate the parameters
    return policy


def ensure_demo_users(kept: dict[str, str]) -> dict[str, str]:
    """Passwords are random per installation and kept in an untracked file, never in the repo."""
    usernames = [ADMIN_USERNAME, *REVIEWERS.values()]
    for username in usernames:
        password = kept.setdefault(username, secrets.token_urlsafe(9))
        _ensure_user(username, password, is_admin=username == ADMIN_USERNAME)
    return {name: kept[name] for name in usernames}


def ensure_demo_application(kept_key: str) -> str:
    """The demo application, bound to every demo domain; its kept key while it still works,
    otherwise a new one (created, or rotated where the application exists)."""
    domains = Domain.objects.filter(slug__in=[spec["slug"] for spec in DOMAINS])
    app = Application.objects.filter(name=APPLICATION_NAME).first()
    if app is None:
        app, key = application_keys.create(APPLICATION_NAME, domains, SEED_ACTOR)
        return key
    app.domains.add(*domains)
    if kept_key and application_keys.application_for(kept_key) == app:
        return kept_key
    return application_keys.rotate(app, SEED_ACTOR)


def _ensure_user(username: str, password: str, is_admin: bool) -> None:
    user, created = get_user_model().objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
    user.is_staff = user.is_superuser = is_admin
    user.save()
