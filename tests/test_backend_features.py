"""The session page reads the backend's declared features, not a guess from its name."""

from __future__ import annotations

import pytest

from inference.transformers_backend.engine import Engine
from reviewer.web.features import backend_features
from tests.session_factory import make_session
from tests.test_reviewer_pages import page_data


def test_it_reports_the_features_the_backend_class_declares():
    assert backend_features() == Engine.features


@pytest.mark.model
@pytest.mark.django_db
def test_it_gives_the_session_page_the_backend_s_features(client, alice):
    session = make_session(alice)
    client.force_login(alice)
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["features"] == sorted(Engine.features)


def test_it_reports_the_vllm_engine_s_features_when_vllm_is_configured(settings):
    pytest.importorskip("vllm", reason="vLLM is not installed (requirements-vllm.txt)")
    from inference.vllm_backend.engine import VllmEngine

    settings.CAESURA_BACKEND = "vllm"
    assert backend_features() == VllmEngine.features
    assert "live_attention" not in backend_features()
