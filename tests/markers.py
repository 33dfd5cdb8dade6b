"""The markers `make test-fast` selects by, enforced where the cost starts: a test that starts
a real worker process must carry ``slow``, one that reads the prepared default model (weights,
tokenizer or config) ``model`` (and ``slow`` for its weights), one that launches the browser
``browser``. Unmarked, such a test would run in the fast loop, and fail there when the model
is not prepared."""

from __future__ import annotations

from pathlib import Path

import pytest

_running: list[pytest.Item] = []  # the test being set up, run or torn down


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


def require(marker: str, what: str) -> None:
    """Fail the running test unless it carries ``marker``: it is about to do ``what``."""
    if _running and _running[-1].get_closest_marker(marker) is None:
        test = _running[-1].nodeid
        pytest.fail(f"{test} {what} but is not marked @pytest.mark.{marker}", pytrace=False)


@pytest.fixture(autouse=True)
def prepared_model_read_only_when_marked(monkeypatch):
    """Every way the code reaches the prepared model goes through these three loaders; its
    weights take seconds to load, so they make a test ``slow`` too."""
    from django.conf import settings
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model_dir = Path(settings.MODEL_DIR).resolve()
    for loader, markers in (
        (AutoConfig, ("model",)),
        (AutoTokenizer, ("model",)),
        (AutoModelForCausalLM, ("model", "slow")),
    ):
        checked = guarded(loader.from_pretrained, model_dir, markers)
        monkeypatch.setattr(loader, "from_pretrained", checked)


def guarded(from_pretrained, model_dir: Path, markers: tuple[str, ...]):
    def load(path, *args, **kwargs):
        if isinstance(path, str | Path) and Path(path).resolve().is_relative_to(model_dir):
            for marker in markers:
                require(marker, f"reads the prepared model at {path}")
        return from_pretrained(path, *args, **kwargs)

    return load
