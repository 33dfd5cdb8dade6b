"""Small things a reviewer meets on the session page, in a real browser without the model
(sessions built from stored events): the attention legend names the whole word after an edit,
a long press's menu has no tip over it, the Reject error sits by the comment, the phone's
head takes two lines and its live heatmap a usable height."""

from __future__ import annotations

import re
import threading
import time

import pytest

from reviewer import events
from reviewer.models import Edit, PauseEvent
from tests.browser.conftest import log_in, screenshot
from tests.browser.stored_sessions import ALTERNATIVES, TEXT, generated_session, paused_session

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
PASSWORD = "alice-password-1"


def open_live(page, server_url, session) -> None:
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_selector("#timeline li")
    page.wait_for_function("() => caesura.state.live")


def replace_chest_pain(session, alice) -> None:
    """The reviewer's edit as the worker announces it: " chest pain" -> " ang" + "ina"."""
    start = TEXT.index(" chest pain")
    edit = Edit.objects.create(
        session=session, kind="replace", start=start, end=start + 11, author=alice, applied=True,
        text_before=" chest pain", text_after=" angina", pause=PauseEvent.objects.get(session=session),
    )  # fmt: skip
    pieces = [" ang", "ina", " since", " this", " morning", "."]
    events.emit(session.pk, "edited", {
        "kind": "replace", "token_start": 3, "token_end": 5, "new_token_end": 5,
        "char_start": start, "char_end": start + 11, "text_before": " chest pain",
        "text_after": " angina", "alternatives": ALTERNATIVES, "lookahead": {"branches": [], "ms": 0},
        "attention": {}, "tokens": [{"text": p, "top1": 0.8, "entropy": 0.5} for p in pieces],
        "edit": edit.pk, "text": TEXT.replace(" chest pain", " angina"),
        "token_ids": [100, 101, 102, 200, 201, 105, 106, 107, 108],
    })  # fmt: skip


def test_the_attention_legend_names_the_whole_word_after_an_edit(page, server_url, alice):
    session = paused_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, session)
    page.locator("#tokens .word", has_text="chest").click()  # where " chest" looked
    page.wait_for_function("() => CaesuraAttention.focused()?.first === 3")
    # Emitted off Playwright's thread: its event loop would keep the event from being sent.
    sender = threading.Thread(target=replace_chest_pain, args=(session, alice))
    sender.start()
    sender.join()
    page.wait_for_function("() => document.getElementById('tokens').textContent.includes('angina')")
    page.wait_for_function(
        "() => document.getElementById('attention-what').textContent.includes('angina')"
    )
    assert page.evaluate("() => CaesuraAttention.focused()") == {"first": 3, "last": 4}
    assert page.locator("#attention-what q").inner_text() == "angina"
    assert page.locator("#tokens .word.att-focus").all_inner_texts() == [" angina"]


def press_at_once(touch, point: dict, held_s: float) -> None:
    """A touch's start and end sent together, their own times ``held_s`` apart."""
    start = time.time()
    for kind, points, at in (("touchStart", [point], start), ("touchEnd", [], start + held_s)):
        touch.send(
            "Input.dispatchTouchEvent", {"type": kind, "touchPoints": points, "timestamp": at}
        )


def test_a_phone_keeps_the_menu_clear_the_head_short_and_the_reject_error_in_view(
    browser, server_url, alice
):
    session = paused_session(alice)
    context = browser.new_context(viewport=PHONE, locale="en-US", has_touch=True, is_mobile=True)
    page = context.new_page()
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, session)

    # Two lines of head: the name and the languages, then the pages, who and Log out.
    parts = ".brand, nav a, .lang, .who, nav > form:not(.langs) button"
    tops = page.evaluate(
        """(parts) => [...document.querySelector('.topbar').querySelectorAll(parts)]
            .map((e) => Math.round(e.getBoundingClientRect().top / 10))""",
        parts,
    )
    assert len(set(tops)) <= 2, tops

    # A tap shows a word's tip; a long press then opens its menu, with no tip over it.
    word = page.locator("#tokens .word", has_text="pain")
    word.tap()
    assert page.locator("#tip").is_visible()
    box = word.bounding_box()
    touch = context.new_cdp_session(page)
    point = {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
    touch.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [point]})
    time.sleep(0.9)
    touch.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    page.wait_for_selector("#token-menu:not([hidden])")
    time.sleep(0.3)  # the tap that ends the press
    assert page.locator("#tip").is_hidden()
    screenshot(page, "details-menu-phone-en")
    page.locator("#token-menu .muted").click()  # inside the menu: it stays open

    # A page too busy to run the press's timer handles its start and end together: the
    # events' own times (0.9 s apart) still make it a long press.
    page.evaluate("() => document.body.click()")  # a click outside closes the menu
    press_at_once(touch, point, held_s=0.9)
    page.wait_for_selector("#token-menu:not([hidden])", timeout=2000)
    # ... and a short one stays a tap
    page.evaluate("() => document.body.click()")
    press_at_once(touch, point, held_s=0.1)
    time.sleep(0.8)
    assert page.locator("#token-menu").is_hidden()
    page.evaluate("() => document.getElementById('notice').scrollIntoView()")

    # Reject with no comment: the error under the comment box, on screen, the box focused.
    page.click("#reject")
    error = page.locator("#decision-error")
    assert error.is_visible() and "say why" in error.inner_text()
    assert error.get_attribute("role") == "alert"
    assert page.evaluate("() => document.activeElement.id") == "decision-comment"
    top = error.bounding_box()["y"]
    assert 0 <= top <= PHONE["height"]
    page.fill("#decision-comment", "Wrong drug.")
    assert error.is_hidden()

    # The live heatmap: a touch caption, a usable height, its axis title inside the figure.
    assert page.locator("#live-attention-card .on-touch").is_visible()
    assert page.locator("#live-attention-card .on-hover").is_hidden()
    page.locator("#live-attention-card").scroll_into_view_if_needed()
    page.wait_for_selector("#live-heatmap .main-svg .xtitle")
    figure = page.locator("#live-heatmap").bounding_box()
    title = page.locator("#live-heatmap .xtitle").bounding_box()
    assert figure["height"] >= 300
    assert (
        figure["x"] <= title["x"] and title["x"] + title["width"] <= figure["x"] + figure["width"]
    )
    assert title["y"] + title["height"] <= figure["y"] + figure["height"]
    context.close()


def test_why_it_paused_shows_only_where_something_paused(page, server_url, alice):
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, generated_session(alice))
    assert page.locator("#audit-graphs-link").is_hidden()
    open_live(page, server_url, paused_session(alice))
    page.wait_for_selector("#audit-graphs-link:not([hidden])")
    # Entropy with its unit, as the audit page gives it.
    assert page.locator("#spark-entropy-last").inner_text().endswith(" nats")


# A long answer: 270 words after the case's, far more than a phone's figure has pixels for.
LONG = [" The", " patient", " reports", " chest", " pain", " since", " this", " morning", "."] * 30

LIVE_FIGURE = """() => {
  const plot = document.getElementById('live-heatmap');
  return { columns: plot.data[0].z[0].length, names: plot.data[0].customdata[0],
           plotPx: plot._fullLayout._size.w };
}"""


def test_a_long_answers_live_heatmap_gives_neighbouring_words_a_column_on_a_phone(
    browser, server_url, alice
):
    session = generated_session(alice, pieces=LONG)
    for locale, name in (
        ("en-US", "details-live-binned-phone-en"),
        ("zh-CN", "details-live-binned-phone-zh"),
    ):
        context = browser.new_context(viewport=PHONE, locale=locale, has_touch=True, is_mobile=True)
        page = context.new_page()
        log_in(page, server_url, "alice", PASSWORD)
        open_live(page, server_url, session)
        page.locator("#live-attention-card").scroll_into_view_if_needed()
        page.wait_for_function("() => document.getElementById('live-heatmap').dataset.tokens")
        figure = page.evaluate(LIVE_FIGURE)
        # Every column at least 3 px wide, each holding a few neighbours named first to last.
        assert figure["plotPx"] / figure["columns"] >= 3, figure
        assert any(" … " in label for label in figure["names"])
        note = page.locator("#live-bins-note")
        assert note.is_visible()
        # The words (the case's and the 240 generated: a full stop is part of its word), and
        # how many a column holds.
        count, size = (int(n) for n in re.findall(r"\d+", note.inner_text()))
        assert count > 240 and size >= 2, (count, size)
        assert count / size <= figure["columns"] < count, (count, size, figure["columns"])
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width} px wide"
        page.evaluate("() => document.getElementById('live-bins-note').scrollIntoView(false)")
        screenshot(page, name)
        context.close()

    # A wide screen for a short answer: one column a word, and no note.
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, generated_session(alice))
    page.locator("#live-attention-card").scroll_into_view_if_needed()
    page.wait_for_function("() => document.getElementById('live-heatmap').dataset.tokens")
    figure = page.evaluate(LIVE_FIGURE)
    assert not any(" … " in label for label in figure["names"])
    assert "morning" in figure["names"] and page.locator("#live-bins-note").is_hidden()
    page.close()


def chinese_phone(browser, server_url, session):
    """Alice's session page, live, on a touch phone in Chinese: its context and page."""
    context = browser.new_context(viewport=PHONE, locale="zh-CN", has_touch=True, is_mobile=True)
    page = context.new_page()
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, session)
    return context, page


def replace_word(page, word: str) -> None:
    """The word's menu (a right click, or a long press on a phone), then "Replace this word"."""
    page.locator("#tokens .word", has_text=word).click(button="right")
    page.click("#replace-here")


def test_a_phone_widens_a_replaced_word_to_a_phrase_word_by_word(browser, server_url, alice):
    """A long press opens a word's menu (no selection can be dragged there): Replace this word,
    then a word after and a word before reach the phrase, spaces and all."""
    session = paused_session(alice)
    context, page = chinese_phone(browser, server_url, session)
    replace_word(page, "chest")
    selected = page.locator("#edit-selection")
    assert selected.inner_text() == " chest"
    page.click("#edit-wider-after")
    assert page.evaluate("() => caesura.state.selection.text") == " chest pain"
    page.click("#edit-wider-before")
    assert page.evaluate("() => caesura.state.selection.text") == " reports chest pain"
    assert page.input_value("#edit-text") == " reports chest pain"
    assert page.locator("#edit-wider-before").inner_text() == "＋ 前一个词"
    page.locator("#edit-panel").scroll_into_view_if_needed()
    screenshot(page, "details-widen-phone-zh")
    context.close()


def test_a_phone_folds_a_long_case_text_and_keeps_a_short_one_open(browser, server_url, alice):
    from reviewer.models import ReviewSession

    short = generated_session(alice)
    long = generated_session(alice)
    ReviewSession.objects.filter(pk=long.pk).update(input_text=" ".join([short.input_text] * 8))
    opened = "() => document.querySelector('details.case').open"
    for viewport, folded in ((PHONE, True), ({"width": 1280, "height": 800}, False)):
        context = browser.new_context(viewport=viewport, locale="en-US")
        page = context.new_page()
        log_in(page, server_url, "alice", PASSWORD)
        open_live(page, server_url, long)
        assert page.evaluate(opened) is not folded
        if folded:  # one tap on its summary opens it
            page.click("details.case > summary")
            assert page.evaluate(opened) is True
        open_live(page, server_url, short)
        assert page.evaluate(opened) is True
        context.close()


def test_an_edit_too_large_for_the_socket_is_refused_and_the_page_stays_live(
    page, server_url, alice
):
    """The socket closes on a message over daphne's limit, and an unanswered command is sent
    again after every reconnect: the page refuses it before sending, and keeps the text."""
    from django.conf import settings

    session = paused_session(alice)
    sent = []
    page.on("websocket", lambda s: s.on("framesent", lambda p: sent.append(p)))
    log_in(page, server_url, "alice", PASSWORD)
    open_live(page, server_url, session)
    replace_word(page, "chest")
    huge = "x" * (settings.SOCKET_MESSAGE_MAX_BYTES + 1)
    page.fill("#edit-text", huge)
    page.click("#edit-apply")
    error = page.locator("#edit-error")  # in the panel, beside the button pressed
    error.wait_for(state="visible")
    assert "Too large to send: 1,025 kB" in error.inner_text()
    assert "at most 1,024 kB" in error.inner_text()
    assert error.is_visible() and page.locator("#edit-apply").is_visible()
    screenshot(page, "details-too-large-en")
    assert page.locator("#edit-panel").is_visible()
    assert page.input_value("#edit-text") == huge  # nothing the reviewer wrote is lost
    assert max(map(len, sent), default=0) < 10_000  # never sent
    page.wait_for_timeout(500)
    assert page.locator("#connection").get_attribute("data-state") == "connected"
    assert page.evaluate("() => caesura.state.outbox.size") == 0
    # An edit of a usual size still goes, and the error goes with a new selection.
    replace_word(page, "pain")
    assert error.is_hidden()
    page.fill("#edit-text", " cough")
    page.click("#edit-apply")
    page.wait_for_function("() => caesura.state.outbox.size === 0")
    assert any('"text": " cough"' in p or '"text":" cough"' in p for p in sent)


def test_a_phone_in_chinese_says_so_too(browser, server_url, alice):
    from django.conf import settings

    session = paused_session(alice)
    context, page = chinese_phone(browser, server_url, session)
    replace_word(page, "chest")
    page.fill("#edit-text", "病" * (settings.SOCKET_MESSAGE_MAX_BYTES // 3 + 1))  # 3 bytes each
    page.click("#edit-apply")
    error = page.locator("#edit-error")
    error.wait_for(state="visible")
    assert error.inner_text().startswith("内容过大，无法发送：")
    screenshot(page, "details-too-large-phone-zh")
    context.close()
