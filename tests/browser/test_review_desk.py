"""The session page as a reviewer's desk, in a real browser, without the model: sessions are
built from the events a worker stores. Accessibility (axe-core), a phone, Chinese throughout,
the decision on the page. Screenshots land in artifacts/screenshots/desk-*.png."""

from __future__ import annotations

import re
import threading

import pytest

from reviewer.models import ReviewSession
from tests.browser.conftest import VIEWPORT, log_in, screenshot, show_live_heatmap
from tests.browser.stored_sessions import generated_session, paused_session
from tests.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
PASSWORD = "alice-password-1"

RUN_AXE = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
  }));
}"""

# Visible text outside user content ([translate=no]: the case, the model's text, names people
# typed) and outside the heatmaps' axes (the model's tokens) that holds a Latin letter.
LATIN_UI_TEXT = """() => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const element = node.parentElement;
    if (!/[A-Za-z]/.test(node.textContent)) continue;
    if (element.closest('[translate="no"], script, style, .plot, .brand, [lang="en"]')) continue;
    if (!element.getClientRects().length) continue; // not shown
    found.push(node.textContent.trim());
  }
  return found;
}"""


def axe_violations(page) -> list[dict]:
    """Serious and critical axe-core violations of the page as it is now."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: `make browser` installs axe-core (npm ci)")
    page.evaluate(
        AXE.read_text()
    )  # evaluated by the browser's debugger: the page's CSP allows no inline script
    found = page.evaluate(RUN_AXE)
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport=PHONE, locale="en-US", has_touch=True, is_mobile=True)
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def chinese(browser):
    context = browser.new_context(viewport=VIEWPORT, locale="zh-CN")
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def open_paused(page, server_url: str, session: ReviewSession) -> None:
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector("#attention-legend:not([hidden]) #attention-top q")
    page.click("#attention-expert summary")  # the heatmaps by layer are folded away at first
    page.wait_for_selector("#pause-heatmap .main-svg")
    show_live_heatmap(page)
    page.wait_for_selector("#timeline li")


def open_finished(page, server_url: str, session: ReviewSession) -> None:
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_load_state()
    assert errors == []
    page.wait_for_function("() => caesura.state.live && caesura.state.tokens.length === 9")
    show_live_heatmap(page)
    page.wait_for_selector("#timeline li")


def no_horizontal_scroll(page) -> None:
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide"


def test_the_paused_page_passes_axe_and_announces_only_the_pause_reason(page, server_url, alice):
    session = paused_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    assert axe_violations(page) == []
    assert page.locator("#pause-reason").get_attribute("aria-live") == "polite"
    assert page.evaluate("() => document.getElementById('tokens').closest('[aria-live]')") is None
    reason = page.locator("#pause-reason").inner_text()
    assert "Unsure" in reason and "Paused after “…chest pain since this morning.”" in reason
    # The snapshot was read after the pause: the panel says the state is safe.
    saved = "Frozen state saved (9.0 MB): any worker can continue from here."
    assert page.locator("#pause-saved").inner_text() == saved
    page.mouse.move(0, 0)
    screenshot(page, "desk-paused-en")
    screenshot(page, "desk-paused-en-full", full_page=True)


def test_a_click_on_a_word_never_rolls_back_a_right_click_offers_it(page, server_url, alice):
    session = paused_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, session)
    word = page.locator("#tokens .word").nth(3)
    word.click()
    assert page.locator("#token-menu").is_hidden()
    word.click(button="right")
    assert page.locator("#token-menu").is_visible()
    assert page.locator("#rollback-here").inner_text() == "Roll back to here"


def test_the_paused_page_on_a_phone(phone, server_url, alice):
    page = phone
    session = paused_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    no_horizontal_scroll(page)
    open_paused(page, server_url, session)
    no_horizontal_scroll(page)
    logout = page.locator("button:has-text('Log out')")
    box = logout.bounding_box()
    assert logout.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]

    # Why it paused and the alternatives come before the text's heatmaps.
    top = {
        name: page.locator(f"#{name}").bounding_box()["y"]
        for name in ("pause-panel", "text-card", "pause-attention-card", "live-attention-card")
    }
    assert top["pause-panel"] < top["text-card"] < top["pause-attention-card"]
    assert top["pause-panel"] < top["live-attention-card"]

    # A tap shows what the model knew; it never opens "Roll back to here".
    page.locator("#tokens .word").nth(4).tap()
    assert page.locator("#token-menu").is_hidden()
    assert page.locator("#tip").is_visible()
    page.locator("#tokens .word").nth(4).dispatch_event("contextmenu")  # as a long press does
    assert page.locator("#token-menu").is_visible()
    page.locator("h1").tap()
    assert page.locator("#token-menu").is_hidden() and page.locator("#tip").is_hidden()
    # The long-press menu is also how a phone picks a word to replace.
    page.locator("#tokens .word").nth(4).dispatch_event("contextmenu")
    page.locator("#replace-here").tap()
    assert page.locator("#edit-panel").is_visible() and page.locator("#token-menu").is_hidden()
    assert page.locator("#edit-selection").inner_text().strip() == "pain"
    no_horizontal_scroll(page)
    page.locator("#edit-close").tap()
    assert axe_violations(page) == []
    screenshot(page, "desk-paused-en-phone", full_page=True)

    page.goto(server_url + "/")
    no_horizontal_scroll(page)
    assert page.locator(f'a[href="/sessions/{session.pk}/"]').first.is_visible()
    screenshot(page, "desk-list-en-phone", full_page=True)


def test_the_decision_shows_on_the_page_with_who_and_when(page, server_url, alice):
    session = generated_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_finished(page, server_url, session)
    assert page.locator("#stop-reason").inner_text() == "Stopped: reached the 9-token limit."
    assert page.locator("#run-controls").is_hidden()  # until a correction reopens it
    page.fill("#decision-comment", "Reads well; dose checked.")
    page.click("#approve")
    page.wait_for_selector('#status[data-status="completed"]')
    assert page.locator("#decided-text").inner_text() == "approved: Reads well; dose checked."
    by = page.locator("#decided-by")
    assert by.is_visible() and by.inner_text().startswith("by alice, ")
    assert page.locator("#decided-by time").get_attribute("datetime")
    assert page.locator("#connection").is_hidden() and page.locator("#decision-panel").is_hidden()
    page.wait_for_selector("#timeline li:has-text('Approved')")
    assert axe_violations(page) == []

    # As the page is drawn from the server next time: the same, nothing live left.
    open_finished(page, server_url, session)
    assert page.locator("#decided-by").inner_text().startswith("by alice, ")
    assert page.locator("#stop-reason").inner_text() == "Stopped: reached the 9-token limit."
    assert page.locator("#run-controls, #toggle-run, .key-hint").count() == 0
    page.mouse.move(0, 0)
    screenshot(page, "desk-finished-en")
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(400)  # Plotly redraws for the narrower window
    no_horizontal_scroll(page)
    screenshot(page, "desk-finished-en-phone", full_page=True)


def test_the_chinese_page_shows_no_latin_ui_text(chinese, server_url, alice):
    page = chinese
    paused = paused_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_paused(page, server_url, paused)
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert page.evaluate(LATIN_UI_TEXT) == []
    reason = page.locator("#pause-reason").inner_text()
    assert "不确定" in reason and "最高概率 24% 低于 35%" in reason
    assert "暂停于“…chest pain since this morning.”之后" in reason
    assert "病房记录" in page.locator("h1").inner_text()
    assert page.locator("#timeline li").first.locator("time").inner_text() != ""
    assert not re.search(r"[AP]M", page.locator("#timeline").inner_text())
    page.mouse.move(0, 0)
    screenshot(page, "desk-paused-zh-hans")
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(400)
    no_horizontal_scroll(page)
    screenshot(page, "desk-paused-zh-hans-phone", full_page=True)
    page.set_viewport_size(VIEWPORT)

    finished = generated_session(alice, reason="eos")
    open_finished(page, server_url, finished)
    assert page.locator("#stop-reason").inner_text() == "模型自行结束了文本。"
    page.fill("#decision-comment", "Looks right.")
    page.click("#approve")
    page.wait_for_selector('#status[data-status="completed"]')
    page.wait_for_selector("#timeline li:has-text('已批准')")
    assert re.match(
        r"由 alice 于 \d{4}年\d{1,2}月\d{1,2}日", page.locator("#decided-by").inner_text()
    )
    assert page.evaluate(LATIN_UI_TEXT) == []
    open_finished(page, server_url, finished)
    assert re.match(
        r"由 alice 于 \d{4}年\d{1,2}月\d{1,2}日", page.locator("#decided-by").inner_text()
    )
    assert page.evaluate(LATIN_UI_TEXT) == []
    page.mouse.move(0, 0)
    screenshot(page, "desk-finished-zh-hans")
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(400)
    no_horizontal_scroll(page)
    screenshot(page, "desk-finished-zh-hans-phone", full_page=True)


def test_a_decision_made_elsewhere_shows_on_an_open_page(page, server_url, alice):
    from django.db import connection

    from reviewer import lifecycle

    session = generated_session(alice)
    log_in(page, server_url, "alice", PASSWORD)
    open_finished(page, server_url, session)
    assert page.locator("#decided-panel").is_hidden()

    # From another thread, as another process would: Playwright's loop runs in this one, and
    # the broadcast must not run on it.
    def reject() -> None:
        try:
            lifecycle.reject(alice, session.pk, "Dose missing (decided in another tab).")
        finally:
            connection.close()  # the thread's own connection, or the test database stays in use

    other = threading.Thread(target=reject)
    other.start()
    other.join()
    page.wait_for_selector('#status[data-status="rejected"]')
    page.wait_for_selector("#decided-by:not([hidden])")
    assert page.locator("#decided-text").inner_text() == (
        "rejected: Dose missing (decided in another tab)."
    )
    assert page.locator("#decided-by").inner_text().startswith("by alice, ")
    assert page.locator("#decision-panel").is_hidden()
