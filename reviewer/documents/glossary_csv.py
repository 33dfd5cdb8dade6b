"""Glossaries as CSV files: columns term, preferred, code, note, with a header row.

Export writes UTF-8 with a byte-order mark, so spreadsheet programs open Chinese terms
correctly; import accepts the file with or without it. An import is all or nothing: every
row is checked first, and either every row is saved in one transaction or none is, with
each problem reported by its line number.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from django.db import models, transaction
from django.utils.translation import gettext as _

from reviewer.models import Glossary, GlossaryTerm


def _max_length(name: str) -> int:
    field = GlossaryTerm._meta.get_field(name)
    assert isinstance(field, models.CharField) and field.max_length is not None, name
    return field.max_length


COLUMNS = ("term", "preferred", "code", "note")
REQUIRED_COLUMNS = ("term", "preferred")
MAX_LENGTHS = {name: _max_length(name) for name in COLUMNS[:3]}
MAX_ERRORS = 50  # enough to fix a file; more would bury the first ones
MAX_FILE_BYTES = 5 * 1024 * 1024  # some 50,000 terms; a larger upload is a mistake
# A cell beginning with one of these is a formula to a spreadsheet program: the export
# writes it behind an apostrophe (which the program hides), and the import takes it off.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class TermRow:
    line: int
    term: str
    preferred: str
    code: str
    note: str


@dataclass(frozen=True)
class ImportResult:
    created: int
    updated: int
    deleted: int


class GlossaryImportError(ValueError):
    """The file was refused; `errors` lists every problem found, with line numbers."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def export_csv(glossary: Glossary) -> bytes:
    """The glossary's terms as CSV bytes (UTF-8 with BOM), sorted by term."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for term in glossary.terms.order_by("term"):
        writer.writerow(
            [inert(value) for value in (term.term, term.preferred, term.code, term.note)]
        )
    return out.getvalue().encode("utf-8-sig")


def inert(cell: str) -> str:
    """The cell as a spreadsheet program shows it without running it as a formula."""
    return "'" + cell if _formula_like(cell) else cell


def _formula_like(cell: str) -> bool:
    """A formula's start, behind any apostrophes: one more goes on at export and comes off
    at import, so a term that begins with an apostrophe round trips too."""
    return cell.lstrip("'").startswith(FORMULA_STARTS)


def import_csv(glossary: Glossary, data: bytes, replace: bool = False) -> ImportResult:
    """Add or update the file's terms (and with `replace`, delete the others), or nothing."""
    rows = parse_csv(data)
    if replace and not rows and glossary.terms.exists():
        # A header alone (an export emptied by mistake) would delete every term.
        raise GlossaryImportError(
            [_("The file has no terms: replacing the glossary with it would delete every term")]
        )
    with transaction.atomic():
        existing = {t.term: t for t in glossary.terms.select_for_update()}
        created, updated = save_rows(glossary, rows, existing)
        deleted = delete_missing(existing, rows) if replace else 0
    return ImportResult(created, updated, deleted)


def parse_csv(data: bytes) -> list[TermRow]:
    """Every row of the file, checked; GlossaryImportError lists what is wrong."""
    if len(data) > MAX_FILE_BYTES:
        limit = MAX_FILE_BYTES // (1024 * 1024)
        raise GlossaryImportError([_("The file is larger than %(mb)d MB") % {"mb": limit}])
    text = decode(data)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        error = _("Line %(line)d: %(error)s") % {"line": 1, "error": exc}
        raise GlossaryImportError([error]) from None
    columns = check_header(header)
    seen: dict[str, int] = {}  # term -> the line it first appeared on
    rows, errors = [], []
    try:
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue  # blank lines are harmless
            row, problems = read_row(reader.line_num, record, columns, seen)
            errors += problems
            if row is not None:
                rows.append(row)
    except csv.Error as exc:
        errors.append(_("Line %(line)d: %(error)s") % {"line": reader.line_num, "error": exc})
    if errors:
        raise GlossaryImportError(errors[:MAX_ERRORS])
    return rows


def decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise GlossaryImportError(
            [_("Line %(line)d: the file is not UTF-8 text") % {"line": line}]
        ) from None
    if "\x00" in text:  # no text holds one, and the database stores none
        line = text[: text.index("\x00")].count("\n") + 1
        raise GlossaryImportError(
            [_("Line %(line)d: the file holds a NUL character, which is not text") % {"line": line}]
        )
    return text


def check_header(header: list[str] | None) -> dict[str, int]:
    """Column name -> index; the header must name term and preferred, and nothing unknown."""
    if header is None:
        raise GlossaryImportError([_("The file is empty: it needs a header row")])
    names = [cell.strip().lower() for cell in header]
    while names and not names[-1]:  # a spreadsheet's empty columns after the last one
        names.pop()
    errors = []
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    if missing:
        errors.append(
            _("Line 1: missing column(s) %(missing)s (the header must be: %(columns)s)")
            % {"missing": ", ".join(missing), "columns": ",".join(COLUMNS)}
        )
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        errors.append(
            _("Line 1: unknown column(s) %(unknown)s (expected: %(columns)s)")
            % {"unknown": ", ".join(unknown), "columns": ",".join(COLUMNS)}
        )
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        errors.append(_("Line 1: column(s) named twice: %(d)s") % {"d": ", ".join(duplicated)})
    if errors:
        raise GlossaryImportError(errors)
    return {name: names.index(name) for name in COLUMNS if name in names}


def read_row(
    line: int, record: list[str], columns: dict[str, int], seen: dict[str, int]
) -> tuple[TermRow | None, list[str]]:
    """One data row and the problems found in it; `seen` maps terms to their first line."""
    if any(cell.strip() for cell in record[len(columns) :]):
        message = _("Line %(line)d: %(found)d values, but the header has %(expected)d columns")
        return None, [message % {"line": line, "found": len(record), "expected": len(columns)}]
    values = {name: cell_value(record, index) for name, index in columns.items()}
    problems = [
        _("Line %(line)d: %(column)s is empty") % {"line": line, "column": name}
        for name in REQUIRED_COLUMNS
        if not values[name]
    ]
    problems += length_problems(line, values)
    term = values["term"]
    if term and term in seen:
        problems.append(
            _('Line %(line)d: term "%(term)s" already appears on line %(first)d')
            % {"line": line, "term": term, "first": seen[term]}
        )
    if term:
        seen.setdefault(term, line)
    if problems:
        return None, problems
    row = TermRow(line, term, values["preferred"], values.get("code", ""), values.get("note", ""))
    return row, []


def cell_value(record: list[str], index: int) -> str:
    cell = record[index] if index < len(record) else ""
    if cell.startswith("'") and _formula_like(cell):  # as exported: see inert
        cell = cell[1:]
    return cell.strip()


def length_problems(line: int, values: dict[str, str]) -> list[str]:
    message = _("Line %(line)d: %(column)s is longer than %(max)d characters")
    return [
        message % {"line": line, "column": name, "max": limit}
        for name, limit in MAX_LENGTHS.items()
        if len(values.get(name, "")) > limit
    ]


def save_rows(
    glossary: Glossary, rows: list[TermRow], existing: dict[str, GlossaryTerm]
) -> tuple[int, int]:
    """Create new terms, update changed ones: (created, updated)."""
    created = updated = 0
    for row in rows:
        fields = {"preferred": row.preferred, "code": row.code, "note": row.note}
        current = existing.get(row.term)
        if current is None:
            GlossaryTerm.objects.create(glossary=glossary, term=row.term, **fields)
            created += 1
        elif any(getattr(current, name) != value for name, value in fields.items()):
            GlossaryTerm.objects.filter(pk=current.pk).update(**fields)
            updated += 1
    return created, updated


def delete_missing(existing: dict[str, GlossaryTerm], rows: list[TermRow]) -> int:
    keep = {row.term for row in rows}
    stale = [term.pk for name, term in existing.items() if name not in keep]
    GlossaryTerm.objects.filter(pk__in=stale).delete()
    return len(stale)
