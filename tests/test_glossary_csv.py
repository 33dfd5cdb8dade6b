"""Glossaries as CSV: a round trip keeps every term, a bad file imports nothing."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from reviewer.documents.glossary_csv import GlossaryImportError, export_csv, import_csv, parse_csv
from reviewer.models import Glossary, GlossaryTerm

pytestmark = pytest.mark.django_db

TERMS = [
    ("heart attack", "acute myocardial infarction", "I21.9", "Prefer the coded form"),
    ("高血压", "原发性高血压", "I10", '中文术语，含逗号, 和 "引号"'),
    ("sugar, high", "hyperglycaemia", "R73.9", "line one\nline two"),
    ("shall", "must", "", ""),
]


@pytest.fixture
def glossary(plain_domain):
    glossary = Glossary.objects.create(domain=plain_domain, name="Cardiology")
    for term, preferred, code, note in TERMS:
        GlossaryTerm.objects.create(
            glossary=glossary, term=term, preferred=preferred, code=code, note=note
        )
    return glossary


def terms_of(glossary: Glossary) -> set[tuple[str, str, str, str]]:
    return {(t.term, t.preferred, t.code, t.note) for t in glossary.terms.all()}


def csv_bytes(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_it_round_trips_a_glossary_through_csv(glossary, plain_domain):
    data = export_csv(glossary)
    copy = Glossary.objects.create(domain=plain_domain, name="Copy")
    result = import_csv(copy, data)
    assert result.created == len(TERMS)
    assert terms_of(copy) == terms_of(glossary)
    assert export_csv(copy) == data


def test_it_exports_utf8_with_a_header_that_spreadsheets_read(glossary):
    data = export_csv(glossary)
    assert data.startswith(b"\xef\xbb\xbf")  # the BOM spreadsheet programs need for Chinese
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert rows[0] == ["term", "preferred", "code", "note"]
    assert ["高血压", "原发性高血压", "I10", TERMS[1][3]] in rows


def test_it_imports_without_a_bom_and_with_columns_in_any_order(glossary):
    data = csv_bytes("preferred,term", "原发性高血压（更新）,高血压", "stroke,CVA")
    result = import_csv(glossary, data)
    assert (result.created, result.updated, result.deleted) == (1, 1, 0)
    assert glossary.terms.get(term="高血压").preferred == "原发性高血压（更新）"
    assert glossary.terms.get(term="CVA").code == ""
    assert glossary.terms.count() == len(TERMS) + 1


def test_it_replaces_the_glossary_when_asked(glossary):
    result = import_csv(glossary, csv_bytes("term,preferred", "shall,must"), replace=True)
    assert result.deleted == len(TERMS) - 1
    assert list(glossary.terms.values_list("term", flat=True)) == ["shall"]


def test_it_refuses_to_replace_a_glossary_with_a_file_of_no_terms(glossary):
    before = terms_of(glossary)
    with pytest.raises(GlossaryImportError) as caught:
        import_csv(glossary, csv_bytes("term,preferred"), replace=True)
    assert "would delete every term" in caught.value.errors[0]
    assert terms_of(glossary) == before
    assert import_csv(glossary, csv_bytes("term,preferred")).created == 0  # adding nothing is fine


def test_it_reports_bad_rows_by_line_number_and_imports_nothing(glossary):
    before = terms_of(glossary)
    data = csv_bytes(
        "term,preferred,code,note",
        "angina,angina pectoris,I20.9,",  # line 2: fine, but must not be saved
        ",no term,,",  # line 3
        "chest pain,,R07.4,",  # line 4
        "angina,again,,",  # line 5: duplicate of line 2
        "a,b,c,d,e",  # line 6: one value too many
    )
    with pytest.raises(GlossaryImportError) as caught:
        import_csv(glossary, data)
    errors = caught.value.errors
    assert any(e.startswith("Line 3:") and "term is empty" in e for e in errors)
    assert any(e.startswith("Line 4:") and "preferred is empty" in e for e in errors)
    assert any(e.startswith("Line 5:") and "line 2" in e for e in errors)
    assert any(e.startswith("Line 6:") for e in errors)
    assert not any(e.startswith("Line 2:") for e in errors)
    assert terms_of(glossary) == before


def test_it_counts_lines_inside_quoted_fields(glossary):
    data = csv_bytes("term,preferred,note", 'x,y,"two', 'lines"', ",missing,")
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv(data)
    assert caught.value.errors[0].startswith("Line 4:")


def test_it_requires_the_header(glossary):
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv(csv_bytes("heart attack,acute myocardial infarction"))
    assert "Line 1" in caught.value.errors[0] and "missing column" in caught.value.errors[0]
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv(b"")
    assert "header" in caught.value.errors[0]


def test_it_refuses_unknown_columns_and_non_utf8(glossary):
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv(csv_bytes("term,preferred,colour", "a,b,red"))
    assert "colour" in caught.value.errors[0]
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv("term,preferred\n高血压,原发性高血压\n".encode("gb18030"))
    assert "UTF-8" in caught.value.errors[0]


def test_it_refuses_a_value_longer_than_the_column(glossary):
    with pytest.raises(GlossaryImportError) as caught:
        parse_csv(csv_bytes("term,preferred,code", f"a,b,{'9' * 51}"))
    assert caught.value.errors[0].startswith("Line 2:") and "code" in caught.value.errors[0]


# --- the admin pages ----------------------------------------------------------------------


def test_it_exports_and_imports_from_the_admin(client, admin_user, glossary, plain_domain):
    client.force_login(admin_user)
    download = client.get(f"/admin/reviewer/glossary/{glossary.pk}/export/")
    assert download.status_code == 200
    assert download["Content-Type"].startswith("text/csv")
    assert "attachment" in download["Content-Disposition"]
    copy = Glossary.objects.create(domain=plain_domain, name="Copy")
    upload = SimpleUploadedFile("terms.csv", download.content, content_type="text/csv")
    answer = client.post(f"/admin/reviewer/glossary/{copy.pk}/import/", {"file": upload})
    assert answer.status_code == 302
    assert terms_of(copy) == terms_of(glossary)


def test_it_lists_import_errors_in_the_admin(client, admin_user, glossary):
    client.force_login(admin_user)
    before = terms_of(glossary)
    bad = csv_bytes("term,preferred", "new term,fine", "高血压,")
    upload = SimpleUploadedFile("terms.csv", bad, content_type="text/csv")
    page = client.post(f"/admin/reviewer/glossary/{glossary.pk}/import/", {"file": upload})
    assert page.status_code == 200
    assert "Line 3: preferred is empty" in page.content.decode()
    assert terms_of(glossary) == before


def test_it_refuses_a_nul_character_by_its_line_in_the_admin(client, admin_user, glossary):
    """The database stores no NUL: the import said so with a 500 before."""
    client.force_login(admin_user)
    before = terms_of(glossary)
    bad = csv_bytes("term,preferred", "fine,good", "ba\x00d,worse")
    upload = SimpleUploadedFile("terms.csv", bad, content_type="text/csv")
    page = client.post(f"/admin/reviewer/glossary/{glossary.pk}/import/", {"file": upload})
    assert page.status_code == 200
    assert "Line 3: the file holds a NUL character" in page.content.decode()
    assert terms_of(glossary) == before


def test_it_exports_no_cell_a_spreadsheet_would_run_and_imports_it_back(glossary, plain_domain):
    risky = [("=1+2", "@SUM(A1)", "+3", "-2+3"), ("'=x", "fine", "", ""), ("-itis", "a", "", "")]
    for term, preferred, code, note in risky:
        GlossaryTerm.objects.create(
            glossary=glossary, term=term, preferred=preferred, code=code, note=note
        )
    data = export_csv(glossary)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    cells = [cell for row in rows for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]  # none starts a formula
    assert ["'=1+2", "'@SUM(A1)", "'+3", "'-2+3"] in rows
    copy = Glossary.objects.create(domain=plain_domain, name="Copy")
    import_csv(copy, data)
    assert terms_of(copy) == terms_of(glossary)  # the apostrophes come off again


def test_it_refuses_an_oversized_header_field_and_file_by_words_not_a_crash(glossary):
    with pytest.raises(GlossaryImportError, match="Line 1: field larger than field limit"):
        parse_csv(b'"' + b"a" * 200_000 + b'"\r\n')
    with pytest.raises(GlossaryImportError, match="larger than 5 MB"):
        parse_csv(b"term,preferred\r\n" + b"a,b\r\n" * 1_200_000)


def test_it_takes_the_empty_columns_a_spreadsheet_leaves_after_the_last(glossary):
    rows = parse_csv(csv_bytes("term,preferred,code,note,,", "stroke,CVA,I64,,,"))
    assert [(r.term, r.preferred, r.code) for r in rows] == [("stroke", "CVA", "I64")]
    with pytest.raises(GlossaryImportError, match="4 values, but the header has 2 columns"):
        parse_csv(csv_bytes("term,preferred,,", "stroke,CVA,,extra"))
