"""Words, not tokens, and tracked changes on the session page: a word the model wrote in
several pieces is one element to hover, tap and roll back to (a Chinese character in two
pieces too, never half decoded), alternatives as the words they start with the look-ahead
sentence, one percent format, an edit shown as ins/del with the untouched words keeping their
shading, and the redline downloaded as a Word document.
Screenshots land in artifacts/screenshots/words-*.png."""

from __future__ import annotations

import io
import json

import pytest
from docx import Document
from docx.oxml.ns import qn

from reviewer import events
from reviewer.models import Edit, PauseEvent, SessionEvent
from tests.browser.conftest import VIEWPORT, log_in, screenshot
from tests.browser.stored_sessions import ALTERNATIVES, PIECES, TEXT, paused_session, store

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

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
# A Chinese text whose "胸" came in two pieces: one ending inside the character (no text yet),
# one completing it.
CHINESE = ["患者", "主诉", "", "胸", "痛", "三", "天", "。"]
WORD_ELEMENTS = """() => [...document.querySelectorAll('#tokens .word:not(.blank)')].map((e) => ({
  text: e.textContent, first: +e.dataset.first, last: +e.dataset.last,
  pieces: e.querySelectorAll('.tok').length, p: e.style.getPropertyValue('--p'),
  piecesShaded: [...e.querySelectorAll('.tok')].some((t) => t.style.getPropertyValue('--p')),
}))"""


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
        "() => [...document.querySelectorAll('#tokens .word')].slice(-2).map((t) => t.style.getPropertyValue('--p'))"
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


def word(page, text: str):
    return page.locator("#tokens .word", has_text=text)


def test_a_word_written_in_pieces_is_one_word_to_hover_and_tap(browser, page, server_url, alice):
    session = paused_session(alice, PIECES)
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    words = page.evaluate(WORD_ELEMENTS)
    assert [w["text"] for w in words] == [
        "The", " patient", " reports", " chest", " pain", " since", " this", " morning", ".",
    ]  # fmt: skip
    morning = next(w for w in words if w["text"] == " morning")
    assert (morning["first"], morning["last"], morning["pieces"]) == (7, 8, 2)
    # Shaded as one, by its least sure piece ("ning", 34%); the pieces carry no shade of their own.
    assert morning["p"] == "0.340" and not any(w["piecesShaded"] for w in words)

    word(page, "morning").hover()
    tip = page.locator("#tip").inner_text()
    assert "Probability 34%" in tip
    assert "The model wrote this word in 2 pieces; shown: the least sure one." in tip
    assert "Blood" in tip and "␣" not in tip  # alternatives as the words they make
    screenshot(page, "words-pieces-tip-en")

    context = browser.new_context(viewport=PHONE, locale="en-US", has_touch=True, is_mobile=True)
    phone = context.new_page()
    log_in(phone, server_url, "alice", PASSWORD)
    open_paused(phone, server_url, session)
    word(phone, "morning").tap()  # a tap shows the word's tip, never the rollback menu
    assert phone.locator("#tip").is_visible() and phone.locator("#token-menu").is_hidden()
    assert "Probability 34%" in phone.locator("#tip").inner_text()
    box = phone.locator("#tip").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    screenshot(phone, "words-pieces-tip-en-phone")
    context.close()


def test_chinese_characters_are_words_decoded_whole(browser, server_url, alice):
    session = paused_session(alice, CHINESE)
    context = browser.new_context(viewport=VIEWPORT, locale="zh-CN")
    page = context.new_page()
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda p: sent.append(json.loads(p))))
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    assert page.locator("#tokens").inner_text() == "患者主诉胸痛三天。"
    words = page.evaluate(WORD_ELEMENTS)
    assert [w["text"] for w in words] == ["患者", "主诉", "胸", "痛", "三", "天", "。"]
    chest = next(w for w in words if w["text"] == "胸")
    assert (chest["first"], chest["last"]) == (2, 3)  # with the piece that began the character
    reason = page.locator("#pause-reason").inner_text()
    assert "暂停于“…" in reason and "\ufffd" not in reason + page.locator("#tokens").inner_text()

    word(page, "胸").hover()
    tip = page.locator("#tip").inner_text()
    assert "概率 69%" in tip and "模型分 2 段写出这个词" in tip
    screenshot(page, "words-chinese-tip-zh-hans")
    page.mouse.move(0, 0)

    page.click("#attention-expert summary")  # the heads' title reads as Chinese
    page.wait_for_selector("#pause-heatmap .main-svg")
    assert page.locator("#heads-title").inner_text() == "第 3 层的各注意力头"

    word(page, "胸").click(button="right")
    page.click("#rollback-here")
    page.wait_for_function("() => caesura.state.outbox.size === 0")
    # Rolled back from the piece that began the character: no half of it is left behind.
    assert [c["position"] for c in sent if c.get("command") == "rollback"] == [2]
    assert Edit.objects.get(session=session, kind="truncate").start == 2
    context.close()


def test_a_pause_inside_a_word_says_so_and_offers_whole_words(page, server_url, alice):
    session = paused_session(alice, PIECES[: PIECES.index("ning")])  # "… this mor"
    row = SessionEvent.objects.get(session=session, type="pause")
    row.payload["alternatives"] = [
        {"token_id": 50, "text": "ning", "prob": 0.24},
        {"token_id": 51, "text": "tality", "prob": 0.2},
        {"token_id": 52, "text": " of", "prob": 0.05},
    ]
    row.save(update_fields=["payload"])
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    reason = page.locator("#pause-reason").inner_text()
    assert "Paused inside a word, after “…chest pain since this mor”" in reason
    words = page.locator("#alternatives .alt-word").all_inner_texts()
    assert words == ["morning", "mortality", "of"]
    page.mouse.move(0, 0)
    screenshot(page, "words-inside-a-word-en")
