"""Loading the demo data: idempotent, so `make run` may call it every time."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from reviewer.demo.demo_data import ADMIN_USERNAME, DOMAINS, POLICIES, REVIEWERS
from reviewer.models import Domain, Glossary, GlossaryTerm, PausePolicy


@transaction.atomic
def load_demo_data(credentials_file: Path) -> dict[str, str]:
    for spec in DOMAINS:
        load_domain(spec)
    return ensure_demo_users(credentials_file)


def load_domain(spec: dict[str, Any]) -> Domain:
    domain, _ = Domain.objects.update_or_create(
        slug=spec["slug"],
        defaults={
            "name": spec["name"],
            "name_zh": spec.get("name_zh", ""),
            "specialty": spec["specialty"],
            "system_prompt": spec["system_prompt"],
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


def ensure_demo_users(credentials_file: Path) -> dict[str, str]:
    """Passwords are random per installation and kept in an untracked file, never in the repo."""
    credentials = _read_credentials(credentials_file)
    usernames = [ADMIN_USERNAME, *REVIEWERS.values()]
    for username in usernames:
        password = credentials.setdefault(username, secrets.token_urlsafe(9))
        _ensure_user(username, password, is_admin=username == ADMIN_USERNAME)
    credentials_file.parent.mkdir(parents=True, exist_ok=True)
    credentials_file.write_text(json.dumps(credentials, indent=2))
    credentials_file.chmod(0o600)
    return {name: credentials[name] for name in usernames}


def _read_credentials(path: Path) -> dict[str, str]:
    return json.loads(path.read_text()) if path.exists() else {}


def _ensure_user(username: str, password: str, is_admin: bool) -> None:
    user, created = get_user_model().objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
    user.is_staff = user.is_superuser = is_admin
    user.save()
