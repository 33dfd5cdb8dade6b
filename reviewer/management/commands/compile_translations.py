"""Compile the gettext catalogs (.po) under LOCALE_PATHS into the .mo files Django reads.

Pure Python (polib), so a fresh machine needs no gettext tools; the .mo files are build
output and not committed. A catalog is compiled only when its .mo is missing or older.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polib
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


def catalogs() -> list[Path]:
    return sorted(po for base in settings.LOCALE_PATHS for po in Path(base).rglob("*.po"))


def is_stale(po: Path, mo: Path) -> bool:
    return not mo.exists() or mo.stat().st_mtime < po.stat().st_mtime


def compile_catalog(po: Path, mo: Path) -> int:
    """Write `mo` from `po` (fuzzy and untranslated entries left out); the entries written."""
    catalog = polib.pofile(str(po))
    tmp = mo.with_suffix(".mo.tmp")
    catalog.save_as_mofile(str(tmp))
    tmp.replace(mo)  # atomic, so a running server never reads half a file
    return len(catalog.translated_entries())


class Command(BaseCommand):
    help = "Compile the translation catalogs (.po) into .mo files, where out of date."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="Compile even if up to date")

    def handle(self, *args: Any, force: bool = False, **options: Any) -> None:
        for po in catalogs():
            mo = po.with_suffix(".mo")
            if force or is_stale(po, mo):
                count = compile_catalog(po, mo)
                self.stdout.write(f"{po}: {count} messages")
