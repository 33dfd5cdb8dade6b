"""The redline: each edit's exact insertions and deletions with author, reason and pause, as
JSON, HTML and a Word document with tracked changes."""

from __future__ import annotations

import io

import pytest
from django.utils import timezone
from docx import Document
from docx.oxml.ns import qn

from reviewer import events
from reviewer.documents import redline
from reviewer.models import Edit, Glossary, GlossaryTerm, PauseEvent, SessionEvent
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db

BEFORE = "Patient has high blood pressure and a cough."
AFTER = "Patient has hypertension and a cough."


def applied(session, author, kind, start, before, after, char_start, **fields):
    edit = Edit.objects.create(
        session=session, kind=kind, start=start, text_before=before, text_after=after,
        author=author, applied=True, **fields,
    )  # fmt: skip
    SessionEvent.objects.create(
        session=session, seq=events.next_seq(session.pk), type=events.edit_kind(kind),
        payload={"edit": edit.pk, "char_start": char_start},
    )  # fmt: skip
    return edit


@pytest.fixture
def reviewed(alice):
    session = make_session(alice)
    session.text = AFTER
    session.save(update_fields=["text"])
    pause = PauseEvent.objects.create(
        session=session, position=7, trigger="Unsure", kind="low_confidence", reason="low",
        halted_at=timezone.now(),
    )  # fmt: skip
    glossary = Glossary.objects.create(domain=session.domain, name="Terms")
    term = GlossaryTerm.objects.create(
        glossary=glossary, term="high blood pressure", preferred="hypertension", code="I10"
    )
    start = BEFORE.index(" high")
    applied(
        session, alice, "replace", start, " high blood pressure", " hypertension", start,
        glossary_term=term, pause=pause,
    )  # fmt: skip
    return session


def test_the_character_diff_leaves_out_the_common_ends():
    assert redline.char_diff(" high blood pressure", " hypertension") == (
        2, "igh blood pressure", "ypertension",
    )  # fmt: skip
    assert redline.char_diff("abc", "abc") == (3, "", "")


def test_a_glossary_edit_is_one_change_with_its_author_reason_and_pause(reviewed):
    [change] = redline.as_json(reviewed)["changes"]
    assert AFTER[change["start"] : change["end"]] == change["inserted"] == "ypertension"
    assert change["deleted"] == "igh blood pressure"
    assert change["author"] == "alice"
    assert "hypertension" in change["reason"] and "I10" in change["reason"]
    assert "Unsure" in change["pause"]


def test_later_edits_move_earlier_changes(reviewed, alice):
    reviewed.text = "The " + AFTER
    reviewed.save(update_fields=["text"])
    applied(reviewed, alice, "replace", 0, "", "The ", 0)
    found = redline.as_json(reviewed)["changes"]
    assert [(c["inserted"], reviewed.text[c["start"] : c["end"]]) for c in found] == [
        ("The ", "The "), ("ypertension", "ypertension"),
    ]  # fmt: skip


def test_the_api_serves_html_and_docx_and_refuses_a_bad_format(client, alice, bob, reviewed):
    url = f"/api/sessions/{reviewed.pk}/redline"
    client.force_login(alice)
    page = client.get(url, {"format": "html"})
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    assert b"<del" in page.content and b"<ins" in page.content and b"alice" in page.content
    assert client.get(url, {"format": "pdf"}).status_code == 400
    word = client.get(url, {"format": "docx"})
    assert word.status_code == 200 and "attachment" in word["Content-Disposition"]
    document = Document(io.BytesIO(word.content))
    body = document.element.body
    [ins] = body.iter(qn("w:ins"))
    [deleted] = body.iter(qn("w:del"))
    assert ins.get(qn("w:author")) == deleted.get(qn("w:author")) == "alice"
    assert "".join(t.text for t in deleted.iter(qn("w:delText"))) == "igh blood pressure"
    assert "hypertension" in "\n".join(p.text for p in document.paragraphs)
    client.force_login(bob)
    assert client.get(url).status_code == 404


def test_it_needs_a_login(client, reviewed):
    assert client.get(f"/api/sessions/{reviewed.pk}/redline").status_code == 401
