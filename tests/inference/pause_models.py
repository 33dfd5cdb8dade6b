"""The pause model trained on the starter set, once per test process, and written to disk."""

from __future__ import annotations

import functools
from pathlib import Path

from inference.learned.pause_model import PauseModel, save_model
from inference.learned.pause_training import load_starter_set, train


@functools.cache
def starter_model() -> PauseModel:
    return train(load_starter_set())


def learned_spec(directory: Path, name: str = "learned", cooldown: int = 0, **params) -> dict:
    """A learned-policy spec pinned to the starter model, saved under `directory`."""
    model = starter_model()
    path = save_model(model, directory)
    pinned = {"model": str(path), "checksum": model.checksum, **params}
    return {"name": name, "kind": "learned", "params": pinned, "cooldown": cooldown}
