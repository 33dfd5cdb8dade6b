"""The redline: each edit's exact insertions and deletions with author, what it replaced with
what, the pause (numbered within the session) and the decision, as JSON, HTML and a Word
document with tracked changes."""

from __future__ import annotations

import html
import io

import pytest
from django.utils import timezone, translation
from docx import Document
from docx.oxml.ns import qn

from reviewer import events
from reviewer.documents import redline, redline_docx
from reviewer.lifecycle import audit
from reviewer.models import (
    Edit,
    Glossary,
    GlossaryTerm,
    PauseEvent,
    PausePolicy,
    ReviewSession,
    SessionEvent,
)
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db

BEFORE = "Patient has high blood pressure and a cough."
AFTER = "Patient has hypertension and a cough."


def applied(session, author, kind, start, before, after, char_start, **fields):
    if fields.get("glossary_term") is not None:  # as lifecycle.edit keeps it
        fields.setdefault("glossary_code", fields["glossary_term"].code)
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
    assert (
        change["reason"]
        == "Replaced “high blood pressure” with “hypertension” (glossary term [I10])"
    )
    assert change["pause"] == "Pause 2 (Unsure) after 7 tokens"  # the session's manual one first


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


def docx_text(session) -> str:
    return "\n".join(p.text for p in Document(io.BytesIO(redline_docx.as_docx(session))).paragraphs)


def test_a_glossary_change_names_the_text_it_replaced_not_the_terms_own_wording(alice):
    """The reviewer selected "blood" and used a term written for "blood clot in the leg"."""
    text = "Man with high deep vein thrombosis of lower extremity pressure."
    session = make_session(alice)
    session.text = text
    session.save(update_fields=["text"])
    glossary = Glossary.objects.create(domain=session.domain, name="Terms")
    term = GlossaryTerm.objects.create(
        glossary=glossary, term="blood clot in the leg",
        preferred="deep vein thrombosis of lower extremity", code="I82.40",
    )  # fmt: skip
    start = len("Man with high ")
    applied(
        session, alice, "replace", start, "blood", term.preferred, start,
        glossary_term=term, pause=session.pauses.get(),
    )  # fmt: skip
    [change] = redline.as_json(session)["changes"]
    assert change["deleted"] == "blood" and change["inserted"] == term.preferred
    said = (
        "Replaced “blood” with “deep vein thrombosis of lower extremity” (glossary term [I82.40])"
    )
    assert change["reason"] == said
    assert (change["text_before"], change["text_after"]) == ("blood", term.preferred)
    page = redline.as_html(session)
    assert "blood clot in the leg" not in page and html.escape(said) in page
    assert "blood clot in the leg" not in docx_text(session) and said in docx_text(session)


def test_a_rewrite_an_insertion_and_a_deletion_say_what_they_changed(alice):
    assert redline.replacement(" high blood pressure", " hypertension") == (
        "Replaced “high blood pressure” with “hypertension”"
    )
    assert redline.replacement("", "The ") == "Inserted “The”"
    assert redline.replacement(" very", "") == "Deleted “very”"
    choose = Edit(kind="choose", text_before=" cough", text_after=" rash")
    assert redline.reason(choose) == (
        "Replaced “cough” with “rash” (alternative chosen at the pause)"
    )
    assert redline.reason(Edit(kind="truncate", text_before=" and more")) == "Rolled back"


def test_pauses_are_numbered_within_the_session_not_by_their_database_id(alice, bob):
    elsewhere = make_session(bob)  # other sessions' pauses take ids first
    for position in range(3):
        PauseEvent.objects.create(
            session=elsewhere, position=position, trigger="manual", reason="asked",
            halted_at=timezone.now(),
        )  # fmt: skip
    session = make_session(alice, status=ReviewSession.RUNNING)
    session.text = AFTER
    session.save(update_fields=["text"])
    pauses = [
        PauseEvent.objects.create(
            session=session,
            position=position,
            trigger=trigger,
            reason="r",
            halted_at=timezone.now() + timezone.timedelta(seconds=position),
        )  # fmt: skip
        for position, trigger in ((3, "manual"), (9, "Unsure"), (12, "manual"))
    ]
    start = BEFORE.index(" high")
    applied(
        session, alice, "replace", start, " high blood pressure", " hypertension", start,
        pause=pauses[2],
    )  # fmt: skip
    assert pauses[2].pk > 3  # a label from the id would not read "Pause 3"
    [change] = redline.as_json(session)["changes"]
    assert change["pause_number"] == 3
    assert change["pause"] == "Pause 3 (manual pause) after 12 tokens"
    assert f"#{pauses[2].pk}" not in redline.as_html(session)
    assert "Pause 3 (manual pause) after 12 tokens" in docx_text(session)
    assert redline.pause_label(pauses[1]) == "Pause 2 (Unsure) after 9 tokens"


def test_the_redline_says_who_decided_when_and_with_what_comment(reviewed, alice):
    reviewed.status, reviewed.decision_comment = ReviewSession.COMPLETED, "Fine as written."
    reviewed.save(update_fields=["status", "decision_comment"])
    record = audit.append("approve", "alice", reviewed, {"comment": "Fine as written."})
    decided = redline.as_json(reviewed)["decision"]
    when = timezone.localtime(record.created_at).strftime("%Y-%m-%d %H:%M %Z")
    assert decided["action"] == "approve" and decided["actor"] == "alice"
    assert decided["time"] == timezone.localtime(record.created_at).isoformat()
    assert decided["text"] == f"Approved by alice, {when}"
    assert decided["comment"] == "Fine as written."
    page = redline.as_html(reviewed)
    assert "<h2>Decision</h2>" in page and f"Approved by alice, {when}" in page
    assert "Comment: Fine as written." in page
    told = docx_text(reviewed)
    assert f"Approved by alice, {when}" in told and "Comment: Fine as written." in told


def test_a_rejection_by_an_application_and_an_open_session_are_told_too(reviewed):
    assert redline.as_json(reviewed)["decision"]["text"] == "Not decided yet (paused)"
    assert "Not decided yet (paused)" in redline.as_html(reviewed)
    reviewed.status = ReviewSession.REJECTED
    reviewed.save(update_fields=["status"])
    audit.append("reject", "app:Demo application", reviewed, {"comment": "Wrong patient."})
    decided = redline.decision(reviewed)
    assert decided["text"].startswith("Rejected by Demo application (application), ")
    assert decided["comment"] == "Wrong patient."


def test_the_html_names_its_language(reviewed):
    with translation.override("en"):
        assert redline.as_html(reviewed).startswith('<!doctype html><html lang="en">')
    with translation.override("zh-hans"):
        assert redline.as_html(reviewed).startswith('<!doctype html><html lang="zh-hans">')
        word = Document(io.BytesIO(redline_docx.as_docx(reviewed)))
        assert word.core_properties.language == "zh-hans"


def test_the_list_numbers_each_change_as_its_marks_in_the_text(reviewed, alice):
    """A change a later edit covered is left out: the list keeps the others' numbers."""
    reviewed.text = "The " + AFTER
    reviewed.save(update_fields=["text"])
    applied(reviewed, alice, "replace", 0, "", "A ", 0)
    applied(reviewed, alice, "replace", 0, "A ", "The ", 0)
    page = redline.as_html(reviewed)
    assert '<li value="1">' in page and '<li value="3">' in page
    assert '<li value="2">' not in page


def test_the_word_file_holds_characters_xml_cannot(reviewed, alice):
    # A comment with a vertical tab, text with a control character a model wrote: the file
    # shows U+FFFD in their place; the other formats keep them.
    reviewed.text = AFTER + "\x01"
    reviewed.status, reviewed.decision_comment = ReviewSession.COMPLETED, "ok\x0bfine"
    reviewed.save(update_fields=["text", "status", "decision_comment"])
    audit.append("approve", "alice", reviewed, {"comment": "ok\x0bfine"})
    told = docx_text(reviewed)
    assert "ok\ufffdfine" in told and "\ufffd" in told.split("\n")[1]
    assert redline.as_json(reviewed)["decision"]["comment"] == "ok\x0bfine"


def test_a_pause_is_named_by_its_policys_name_in_the_page_language(reviewed):
    PausePolicy.objects.create(
        domain=reviewed.domain, name="Unsure", name_zh="不确定", kind="low_confidence"
    )
    pause = reviewed.pauses.get(trigger="Unsure")
    assert redline.pause_label(pause) == "Pause 2 (Unsure) after 7 tokens"
    with translation.override("zh-hans"):
        assert "不确定" in redline.pause_label(pause) and "Unsure" not in redline.pause_label(pause)


def test_an_insertion_before_an_earlier_one_at_the_same_place_keeps_both(alice):
    session = make_session(alice)
    session.text = "Patient has a mild dry cough."
    session.save(update_fields=["text"])
    applied(session, alice, "replace", 14, "", "dry ", 14)
    applied(session, alice, "replace", 14, "", "mild ", 14)
    found = [(c.inserted, c.start) for c in redline.changes(session)]
    assert found == [("mild ", 14), ("dry ", 19)]


def logged(session, kind, **payload):
    SessionEvent.objects.create(
        session=session, seq=events.next_seq(session.pk), type=kind, payload=payload
    )


def test_a_rollback_takes_a_deletion_after_its_cut_away_with_the_text_around_it(alice):
    session = make_session(alice)
    words = ["The", " patient", " has", " chest pain", " radiating to the left arm."]
    for position, word in enumerate(words):
        logged(session, events.TOKEN, position=position, token_id=position + 1, text=word)
    kept = "".join(words[:4])
    edit = Edit.objects.create(
        session=session, kind="truncate", start=4, text_before=words[4], text_after="",
        author=alice, applied=True,
    )  # fmt: skip
    logged(
        session, events.TRUNCATED, edit=edit.pk, char_start=len(kept), token_start=4,
        token_ids=[1, 2, 3, 4], text=kept, tokens=[],
    )  # fmt: skip
    logged(session, events.TOKEN, position=4, token_id=9, text=" and fatigue.")
    logged(session, events.ROLLBACK, removed_from=2, removed_to=5, removed_text="")
    for position, word in enumerate([" reports", " mild fatigue after exercise."], 2):
        logged(session, events.TOKEN, position=position, token_id=position + 20, text=word)
    session.text = "The patient reports mild fatigue after exercise."
    session.save(update_fields=["text"])
    assert redline.rollback_cuts(session)[0][1] == len("The patient")
    assert redline.changes(session) == []  # the struck text is not inside the new words
    assert "<del>" not in redline.as_html(session)


def test_a_glossary_edit_keeps_the_code_the_term_had_when_it_was_used(reviewed):
    """Re-importing the glossary, or deleting the term, rewrites no decided session's redline."""
    said = "Replaced “high blood pressure” with “hypertension” (glossary term [I10])"
    assert redline.as_json(reviewed)["changes"][0]["reason"] == said
    term = GlossaryTerm.objects.get(code="I10")
    term.code = "I10.9"
    term.save()
    assert redline.as_json(reviewed)["changes"][0]["reason"] == said
    term.delete()
    assert redline.as_json(reviewed)["changes"][0]["reason"] == said
    assert said in docx_text(reviewed)
