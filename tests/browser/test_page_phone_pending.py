"""At phone width a decision still on its way shows where the reviewer is, in a real browser:
Approve tapped at the foot of the page while the connection is down is listed at the bottom of
the screen, above the notice and the Resume bar, in English and in Chinese, and the greyed
Approve looks greyed. The screenshots are saved for a person to look at."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.browser.session_page_support import busy_worker as holding
from tests.browser.stored_sessions import paused_session

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def busy_worker():
    """A resume waits in a busy worker's queue: no model runs on these sessions."""
    with holding() as hold:
        yield hold


PHONE = {"width": 390, "height": 844}
BACKGROUND = "(e) => getComputedStyle(e).backgroundColor"
# A notice as the page shows one (notice.js): here one that tells nothing, to see both at once.
SHOW_NOTICE = """(text) => {
  const notice = document.getElementById('notice');
  notice.textContent = text;
  notice.hidden = false;
}"""


def inside(box: dict, viewport: dict) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= viewport["width"]
        and box["y"] + box["height"] <= viewport["height"]
    )


@pytest.mark.parametrize(
    ("language", "queued", "shot"),
    [
        ("en", "Approve: waiting for the connection…", "fix-page-phone-pending-en"),
        ("zh-hans", "批准：等待连接恢复…", "fix-page-phone-pending-zh"),
    ],
)
def test_an_approve_waiting_for_the_connection_shows_at_the_bottom_of_a_phone(
    browser, server_url, alice, language, queued, shot
):
    session = paused_session(alice)
    context = browser.new_context(
        viewport=PHONE, locale="en-US", has_touch=True, is_mobile=True, device_scale_factor=2
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, server_url, "alice", "alice-password-1")
    if language != "en":
        page.click(f'button.lang[value="{language}"]')  # the page's own language switch
        page.wait_for_selector(f'html[lang="{language}"]')
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector('#connection[data-state="connected"]')
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")

    page.locator("#decision-panel").scroll_into_view_if_needed()  # the foot of the page
    page.fill("#decision-comment", "ok")
    enabled = page.locator("#approve").evaluate(BACKGROUND)
    context.set_offline(True)
    page.evaluate("() => caesura.drop()")
    page.wait_for_selector('#connection:not([data-state="connected"])', state="attached")
    page.tap("#approve")

    chip = page.locator('#pending li[data-command="approve"][data-state="queued"]')
    chip.wait_for()
    assert chip.inner_text() == queued
    assert inside(page.locator("#pending").bounding_box(), PHONE)  # where the reviewer is
    assert page.locator("#approve").is_disabled()
    assert page.locator("#approve").evaluate(BACKGROUND) != enabled  # and it looks it
    assert page.locator("#approve").is_visible()

    # With a notice too: one above the other, both above the Resume bar, all in view.
    page.evaluate(SHOW_NOTICE, "—")
    pending = page.locator("#pending").bounding_box()
    notice = page.locator("#notice").bounding_box()
    bar = page.locator("#run-controls").bounding_box()
    assert inside(notice, PHONE) and inside(bar, PHONE)
    assert pending["y"] + pending["height"] <= notice["y"]
    assert notice["y"] + notice["height"] <= bar["y"]
    screenshot(page, f"{shot}-with-notice")
    page.evaluate("() => { document.getElementById('notice').hidden = true; }")
    screenshot(page, shot)

    context.set_offline(False)  # back: the approve goes, once
    page.wait_for_selector('#status[data-status="completed"]', timeout=30_000)
    page.wait_for_selector("#pending", state="hidden")
    context.close()


def test_the_pending_list_stays_in_the_page_head_on_a_wide_screen(
    page, server_url, alice, busy_worker
):
    session = busy_worker(paused_session(alice))
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)
    page.wait_for_selector('#connection[data-state="connected"]')
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.context.set_offline(True)
    page.evaluate("() => caesura.drop()")
    page.click("#toggle-run")  # Resume, queued
    page.wait_for_selector('#pending li[data-command="resume"]')
    assert (
        page.locator("#pending").evaluate("(e) => getComputedStyle(e.parentElement).position")
        == "static"
    )
    head = page.locator(".session-head").bounding_box()
    pending = page.locator("#pending").bounding_box()
    assert (
        head["y"] <= pending["y"] and pending["y"] + pending["height"] <= head["y"] + head["height"]
    )
    page.context.set_offline(False)
    page.wait_for_selector("#pending", state="hidden", timeout=30_000)
