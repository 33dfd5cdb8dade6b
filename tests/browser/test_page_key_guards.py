"""The session page's keys keep the guards its buttons have, in a real browser: a key does
nothing while its button is greyed or its command is on its way (Ctrl+Enter, `1`–`5`, a double
click, the space bar), the rollback menu opens only where the text takes a correction, and
nothing acts behind the open list of shortcuts."""

from __future__ import annotations

import pytest

from reviewer.models import AuditRecord, ReviewSession
from tests.browser.conftest import log_in, screenshot
from tests.browser.session_page_support import busy_worker as holding
from tests.browser.session_page_support import named as commands
from tests.browser.session_page_support import sent_commands
from tests.browser.stored_sessions import (
    WORDS,
    generated_session,
    new_session,
    paused_session,
    store,
    tokens,
)

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def busy_worker():
    """A choice's resume waits in a busy worker's queue: no model runs on these sessions."""
    with holding() as hold:
        yield hold


def open_session(page, server_url: str, session: ReviewSession) -> None:
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    # Shown while the session may change (a decided one's is hidden), connected all the same.
    page.wait_for_selector('#connection[data-state="connected"]', state="attached")
    page.wait_for_function("() => caesura.state.live")
    page.wait_for_selector("#tokens .word:not(.blank)")


def test_ctrl_enter_twice_approves_once(page, server_url, alice):
    session = generated_session(alice)
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.keyboard.press("a")
    page.keyboard.type("ok")
    page.keyboard.press("Control+Enter")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector('#status[data-status="completed"]')
    page.wait_for_timeout(500)  # a second approve would be answered by now
    assert len(commands(sent, "approve")) == 1
    assert not page.locator("#notice.bad").is_visible()


def test_an_alternative_double_clicked_or_its_key_pressed_twice_is_chosen_once(
    page, server_url, alice, busy_worker
):
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.dblclick("#alternatives button.alt >> nth=0")
    page.wait_for_function("() => caesura.state.status === 'running'")
    page.wait_for_timeout(500)
    assert len(commands(sent, "choose")) == 1
    assert not page.locator("#notice.bad").is_visible()

    second = busy_worker(paused_session(alice))
    sent.clear()
    page.goto(f"{server_url}/sessions/{second.pk}/")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector('#connection[data-state="connected"]')
    page.keyboard.press("2")
    page.keyboard.press("2")
    page.wait_for_function("() => caesura.state.status === 'running'")
    page.wait_for_timeout(500)
    assert len(commands(sent, "choose")) == 1
    assert not page.locator("#notice.bad").is_visible()


def test_the_space_bar_does_nothing_while_pause_is_greyed(page, server_url, alice):
    """No worker runs: the pause is acknowledged, and its status never comes. The button is
    greyed meanwhile (a press would only be refused), and so is the space bar."""
    session = new_session(alice, ReviewSession.RUNNING, WORDS)
    store(session, "status", {"status": ReviewSession.RUNNING})
    tokens(session, WORDS)
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.keyboard.press("Space")
    page.wait_for_selector("#toggle-run:disabled")
    page.wait_for_function("() => caesura.state.outbox.size === 0")  # acknowledged
    assert page.locator("#toggle-run").is_disabled()
    page.keyboard.press("Space")
    page.wait_for_timeout(500)
    assert len(commands(sent, "pause")) == 1
    requested = AuditRecord.objects.filter(session=session, action="pause_requested")
    assert requested.count() == 1


def test_r_or_enter_opens_no_rollback_menu_on_a_session_that_takes_no_correction(
    page, server_url, alice
):
    session = generated_session(alice)
    session.status = ReviewSession.COMPLETED
    session.save(update_fields=["status"])
    store(session, "status", {"status": ReviewSession.COMPLETED})
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.locator("#tokens .word:not(.blank)").last.focus()
    page.keyboard.press("r")
    assert page.locator("#token-menu").is_hidden()
    page.keyboard.press("Enter")
    assert page.locator("#token-menu").is_hidden()
    page.wait_for_timeout(300)
    assert commands(sent) == []
    assert not page.locator("#notice.bad").is_visible()


def test_no_key_acts_behind_the_list_of_shortcuts(page, server_url, alice, busy_worker):
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    # The focus is on its Close button (Space or Enter there closes it, as a button does).
    for key in ("1", "2", "j", "a", "x", "e", "r"):
        page.keyboard.press(key)
    assert page.locator("#keys-help").is_visible()
    screenshot(page, "fix-page-keys-help-modal")
    page.wait_for_timeout(300)
    assert commands(sent) == []
    assert page.evaluate("() => caesura.state.status") == "paused"
    page.keyboard.press("Escape")
    assert page.locator("#keys-help").is_hidden()
    page.keyboard.press("1")  # once it is closed, the keys work again
    page.wait_for_function("() => caesura.state.status === 'running'")
    assert len(commands(sent, "choose")) == 1
