"""Typed readers of environment variables for the engine package, which runs without Django.

Each fails with ``SettingError`` naming the variable, so a typo in a deployment shows up when
the engine loads instead of as odd behaviour later (webapp/env.py does the same for Django).
"""

from __future__ import annotations

import os
from pathlib import Path

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
REPO_ROOT = Path(__file__).resolve().parent.parent


class SettingError(ValueError):
    """An environment variable holds a value the engine cannot use; the message names it."""


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in TRUE_WORDS | FALSE_WORDS:
        return raw in TRUE_WORDS
    raise SettingError(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, "").strip().lower() or default
    if value not in choices:
        raise SettingError(f"{name}={value!r}: choose one of {', '.join(choices)}")
    return value


def data_dir() -> Path:
    """$CAESURA_DATA_DIR, else <repo>/var: models, compiled code, snapshots. ``~`` expanded
    and the path made absolute, as webapp/env.py's env_path does: Django and the engine must
    mean the same place (a literal ``~`` comes from systemd's Environment=, compose or k8s)."""
    raw = os.environ.get("CAESURA_DATA_DIR")
    return Path(raw).expanduser().resolve() if raw else REPO_ROOT / "var"
