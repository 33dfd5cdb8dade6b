"""Typed readers for settings that come from environment variables.

Each helper fails with ImproperlyConfigured and a message naming the variable, so a
typo in a deployment shows up at start-up instead of as odd behaviour later.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import zoneinfo
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: choose one of {', '.join(choices)}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} must be at most {maximum}")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_log_level(name: str, default: str) -> str:
    """A logging level in any case (``info``, ``Warning``; ``warn`` for WARNING), upper-cased
    as logging's configuration asks."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    level = raw.strip().upper()
    level = {"WARN": "WARNING"}.get(level, level)
    if level not in LOG_LEVELS:
        raise ImproperlyConfigured(f"{name}={raw!r}: choose one of {', '.join(LOG_LEVELS)}")
    return level


def env_time_zone(name: str, default: str) -> str:
    """An IANA time zone name (``UTC``, ``Europe/Paris``) that this system's time zone
    database knows."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    zone = raw.strip()
    try:
        zoneinfo.ZoneInfo(zone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a time zone; use an IANA name such as UTC or Europe/Paris"
        ) from None
    return zone


def env_url(name: str, default: str, schemes: tuple[str, ...] | None = None) -> str:
    """A service's URL: not empty, ``scheme://…``, its scheme one of ``schemes`` where given.
    A refusal shows the value with its password masked."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    url = raw.strip()
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if not scheme:
        raise ImproperlyConfigured(
            f"{name}={mask_url(raw)!r} is not a URL; expected scheme://host:port/…"
        )
    if schemes is not None and scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}={mask_url(raw)!r}: the scheme must be one of {', '.join(schemes)}"
        )
    return url


def mask_url(url: str) -> str:
    """``url`` with the password in it, if any, shown as ``**`` (as Celery's banner shows
    its broker), fit for a log or a terminal."""
    if "://" not in url:  # not a URL: what follows its last '@' only, if it has one
        return "**@" + url.rpartition("@")[2] if "@" in url else url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "**@" + url.rpartition("@")[2] if "@" in url else url
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:**@{host}"))


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


LOCKOUT_FIELDS = {"username", "ip_address", "user_agent"}


def env_lockout_parameters(name: str, default: list[str | list[str]]) -> list[str | list[str]]:
    """What a login lockout is keyed on: "username,ip_address" locks an account and, apart, an
    address; "username+ip_address" locks only that account from that address."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    groups: list[str | list[str]] = []
    for item in raw.split(","):
        fields = [field.strip() for field in item.split("+") if field.strip()]
        unknown = set(fields) - LOCKOUT_FIELDS
        if not fields or unknown:
            raise ImproperlyConfigured(
                f"{name}={raw!r}: use {', '.join(sorted(LOCKOUT_FIELDS))}, joined by ',' or '+'"
            )
        groups.append(fields[0] if len(fields) == 1 else fields)
    return groups


def env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return Path(raw).expanduser().resolve() if raw else default


def env_secret(name: str, fallback_file: Path) -> str:
    """A secret from NAME, from the file named by NAME_FILE, or generated once into fallback_file."""
    if os.environ.get(name):
        return os.environ[name]
    file_var = os.environ.get(f"{name}_FILE")
    if file_var:
        try:
            secret = Path(file_var).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_var!r} cannot be read: {exc}") from None
        if not secret:  # an empty mounted secret: a blank key anyone could compute
            raise ImproperlyConfigured(f"{name}_FILE={file_var!r} is empty; put the secret in it")
        return secret
    return _generated_secret(fallback_file)


def _generated_secret(path: Path) -> str:
    """Processes starting together (the web process and a worker on one volume) must agree:
    the secret is written whole beside the file and linked into place, and the first link
    wins."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own: two containers starting together may both run as pid 1.
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
        draft = Path(name)
        with os.fdopen(handle, "w") as file:
            file.write(secrets.token_urlsafe(48))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: an exclusive create, first wins
            with contextlib.suppress(FileExistsError):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as file:
                    file.write(draft.read_text())
        finally:
            draft.unlink()
    return path.read_text().strip()
