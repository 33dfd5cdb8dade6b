"""Where compiled code is kept between starts (inductor's caches: the transformers backend's
decode step and vLLM's graph), so that only a machine's first start compiles."""

from __future__ import annotations

import os
from pathlib import Path

from inference.env import data_dir

VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def cache_dir() -> Path:
    return data_dir() / "compiled"


def use_cache_dir(path: Path | None = None) -> None:
    """Keep inductor's compiled code under ``path`` (default: the data dir's) unless the
    operator chose a place. Importing inductor's config writes its default (under /tmp, which
    a reboot or a new container empties) into the variable, so that value counts as no choice."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    chosen = os.environ.get(VARIABLE)
    if chosen is None or os.path.abspath(chosen) == os.path.abspath(default_cache_dir()):
        path = path or cache_dir()
        path.mkdir(parents=True, exist_ok=True)
        os.environ[VARIABLE] = str(path)
