"""Application keys: shown once, kept as a digest, rotated and revoked with an audit record."""

from __future__ import annotations

import pytest

from reviewer.lifecycle import application_keys
from reviewer.models import Application, AuditRecord
from tests.session_factory import clinical_notes

pytestmark = pytest.mark.django_db


def test_it_keeps_only_a_digest_of_the_key_it_shows_once():
    app, key = application_keys.create("Note drafter", [clinical_notes()], "root")
    assert key.startswith("cae_") and key not in app.key_digest
    assert application_keys.application_for(key) == app
    assert list(app.domains.all()) == [clinical_notes()]
    assert not Application.objects.filter(key_digest=key).exists()


def test_it_stops_the_old_key_when_rotated_and_every_key_when_revoked():
    app, old = application_keys.create("Note drafter", [clinical_notes()], "root")
    new = application_keys.rotate(app, "root")
    assert application_keys.application_for(old) is None
    assert application_keys.application_for(new) == app
    application_keys.revoke(app, "root")
    assert application_keys.application_for(new) is None
    assert application_keys.application_for("Token abc") is None
    actions = AuditRecord.objects.values_list("action", flat=True)
    assert list(actions) == [
        "application_created",
        "application_key_rotated",
        "application_revoked",
    ]
