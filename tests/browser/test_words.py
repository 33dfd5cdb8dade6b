"""Words, not tokens, and tracked changes on the session page: alternatives as the words they
start with the look-ahead sentence, one percent format, an edit shown as ins/del with the
untouched words keeping their shading, and the redline downloaded as a Word document.
Screenshots land in artifacts/screenshots/words-*.png."""

from __future__ import annotations

import io

import pytest
from docx import Document
from docx.oxml.ns import qn

from reviewer import events
from reviewer.models import Edit, PauseEvent, SessionEvent
from tests.browser.conftest import VIEWPORT, log_in, screenshot
from tests.browser.stored_sessions import ALTERNATIVES, TEXT, paused_session, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "alice-password-1"
PHONE = {"width": 390, "height": 844}
LOOKAHEAD = {
    "branches": [
        {"token_id": 42, "ids": [42, 1, 2, 3], "text": " Blood pressure was high", "ends": False},
        {"token_id": 7, "ids": [7, 4], "text": " He was", "ends": False},
        {"token_id": 9, "ids": [9, 5, 6], "text": " ECG showed ST", "ends": False},
    ],
    "ms": 120.0,
}


def with_lookahead(session):
    row = SessionEvent.objects.get(session=session, type="pause")
    row.payload["lookahead"] = LOOKAHEAD
    row.save(update_fields=["payload"])
    return session


def with_edit(session, alice):
    """The reviewer replaced " chest pain" with " angina" at the pause."""
    start = TEXT.index(" chest pain")
    text = TEXT.replace(" chest pain", " angina")
    edit = Edit.objects.create(
        session=session, kind="replace", start=start, end=start + 11, author=alice, applied=True,
        text_before=" chest pain", text_after=" angina", pause=PauseEvent.objects.get(session=session),
    )  # fmt: skip
    pieces = [" angina", " since", " this", " morning", "."]
    store(session, "edited", {
        "kind": "replace", "token_start": 3, "token_end": 5, "new_token_end": 4,
        "char_start": start, "char_end": start + 11, "text_before": " chest pain",
        "text_after": " angina", "alternatives": ALTERNATIVES, "lookahead": {"branches": [], "ms": 0},
        "attention": {}, "tokens": [{"text": p, "top1": 0.8, "entropy": 0.5} for p in pieces],
        "edit": edit.pk, "text": text, "token_ids": [100, 101, 102, 103, 105, 106, 107, 108],
    })  # fmt: skip
    session.text = text
    session.save(update_fields=["text"])
    return session


def open_paused(page, server_url, session):
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector("#timeline li")


def test_alternatives_read_as_words_in_their_sentence(page, server_url, alice):
    session = with_lookahead(paused_session(alice))
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    words = page.locator("#alternatives .alt-word").all_inner_texts()
    assert words == ["Blood", "He", "ECG"]
    preview = page.locator("#alternatives .alt-preview").first.inner_text()
    assert preview == "…pain since this morning. Blood pressure was high…"
    assert "␣" not in page.locator("#pause-panel").inner_text()
    # One format: the reason, the first alternative and the sparkline's last point agree.
    assert "24%" in page.locator("#pause-reason").inner_text()
    assert page.locator("#alternatives .prob").first.inner_text() == "24%"
    assert page.locator("#spark-probability-last").inner_text() == "24%"
    page.mouse.move(0, 0)
    screenshot(page, "words-paused-en")
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    assert (
        "暂停于“…chest pain since this morning.”之后" in page.locator("#pause-reason").inner_text()
    )
    screenshot(page, "words-paused-zh-hans")


def test_an_edit_shows_as_ins_and_del_and_the_redline_downloads(page, server_url, alice):
    session = with_edit(with_lookahead(paused_session(alice)), alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    page.wait_for_selector("#tokens ins.redline")
    assert page.locator("#tokens del.redline").inner_text() == "chest pain"
    assert page.locator("#tokens ins.redline").inner_text() == "angina"
    # The words after the edit were not touched: they keep their shading.
    shaded = page.evaluate(
        "() => [...document.querySelectorAll('#tokens .tok')].slice(-2).map((t) => t.style.getPropertyValue('--p'))"
    )
    assert all(value and value != "1.000" for value in shaded)
    page.mouse.move(0, 0)
    screenshot(page, "words-edited-en")
    with page.expect_download() as download:
        page.click("#redline-docx")
    with open(download.value.path(), "rb") as saved:
        document = Document(io.BytesIO(saved.read()))
    body = document.element.body
    assert [e.get(qn("w:author")) for e in body.iter(qn("w:ins"))] == ["alice"]
    deleted = "".join(t.text for t in body.iter(qn("w:delText")))
    assert deleted == "chest pain"
    assert any("Unsure" in p.text for p in document.paragraphs)


def test_the_edited_page_on_a_phone_and_in_chinese(browser, server_url, alice):
    session = with_edit(with_lookahead(paused_session(alice)), alice)
    for name, options in {
        "words-edited-en-phone": {
            "viewport": PHONE,
            "locale": "en-US",
            "has_touch": True,
            "is_mobile": True,
        },
        "words-edited-zh-hans": {"viewport": VIEWPORT, "locale": "zh-CN"},
    }.items():
        context = browser.new_context(**options)
        page = context.new_page()
        log_in(page, server_url, "alice", PASSWORD)
        open_paused(page, server_url, session)
        page.wait_for_selector("#tokens ins.redline")
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= options["viewport"]["width"]
        screenshot(page, name)
        context.close()
    assert events.EDITED == "edited"
