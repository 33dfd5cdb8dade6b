"""The web process loads the model's tokenizer while it starts, not in the first request."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from reviewer.web import tokenizer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cold_tokenizer():
    tokenizer.tokenizer.cache_clear()
    tokenizer.context_length.cache_clear()
    yield
    tokenizer.tokenizer.cache_clear()
    tokenizer.context_length.cache_clear()


@pytest.mark.model
def test_it_loads_the_tokenizer_and_the_context_length(cold_tokenizer):
    assert tokenizer.load_at_start() is True
    assert tokenizer.tokenizer.cache_info().currsize == 1
    assert tokenizer.context_length.cache_info().currsize == 1


def test_it_leaves_the_tokenizer_for_later_without_a_model(cold_tokenizer, tmp_path, caplog):
    with override_settings(MODEL_DIR=tmp_path):
        assert tokenizer.load_at_start() is False
    assert tokenizer.tokenizer.cache_info().currsize == 0
    assert "no model" in caplog.text


@pytest.mark.model
def test_it_has_the_tokenizer_once_the_asgi_application_is_built():
    probe = (
        "import webapp.asgi\n"
        "from reviewer.web.tokenizer import tokenizer\n"
        "print(tokenizer.cache_info().currsize)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "1"
