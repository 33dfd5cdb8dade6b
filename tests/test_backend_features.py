"""The session page reads the backend's declared features, not a guess from its name."""

from __future__ import annotations

import pytest

from inference.transformers_backend.engine import Engine
from reviewer.web.features import backend_features
from tests.session_factory import make_session
from tests.test_reviewer_pages import page_data


def test_the_features_are_the_ones_the_backend_class_declares():
    assert backend_features() == Engine.features


@pytest.mark.django_db
def test_the_session_page_carries_the_backend_s_features(client, alice):
    session = make_session(alice)
    client.force_login(alice)
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["features"] == sorted(Engine.features)
    assert data["liveAttention"] is ("live_attention" in Engine.features)
