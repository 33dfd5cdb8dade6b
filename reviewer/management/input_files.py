"""The input files management commands read (a prompt file, labelled examples): one way to
refuse a missing, unreadable or malformed one, naming the option it came from."""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterator
from pathlib import Path

from django.core.management.base import CommandError


def require_file(option: str, path: Path, kind: str) -> None:
    """``kind``: what the option takes, for the refusal of a directory ("a CSV file")."""
    if not path.exists():
        raise CommandError(f"{option} {path}: no such file")
    if not path.is_file():
        raise CommandError(f"{option} {path}: not a file (a directory?); give {kind}")


@contextlib.contextmanager
def reading(option: str, path: Path) -> Iterator[None]:
    """What goes wrong reading ``path`` inside, said as a CommandError naming ``option``."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"{option} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except csv.Error as exc:
        raise CommandError(f"{option} {path}: not a readable CSV file ({exc})") from None
    except OSError as exc:
        raise CommandError(f"{option} {path}: cannot read it ({exc.strerror})") from None
