"""A review from the keyboard alone: the shortcut list, moving between pauses and words (a
word the model wrote in several pieces is one stop), the rollback menu, replacing, taking an
alternative, deciding with a comment, the next case. No mouse event is sent after logging in."""

from __future__ import annotations

import json

import pytest

from reviewer.models import Edit
from tests.browser.conftest import screenshot
from tests.browser.stored_sessions import ALTERNATIVES, PIECES, generated_session, paused_session

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

# The focused element: a word by its first token's position, anything else by its id.
FOCUSED = "() => { const e = document.activeElement; return e.dataset.first ?? e.id; }"
FOCUSED_WORD = """() => {
  const e = document.activeElement;
  return { text: e.textContent, pieces: e.querySelectorAll('.tok').length };
}"""
MORNING = PIECES.index(" mor")  # " morning", written as " mor" + "ning"


def log_in_by_keyboard(page, server_url: str) -> None:
    page.goto(server_url + "/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-password-1")
    page.keyboard.press("Enter")
    page.wait_for_url(server_url + "/")


def sent_commands(page) -> list[dict]:
    sent: list[dict] = []
    page.on(
        "websocket", lambda socket: socket.on("framesent", lambda p: sent.append(json.loads(p)))
    )
    return sent


def test_a_whole_review_from_the_keyboard(page, server_url, alice):
    decided = generated_session(alice)
    paused = paused_session(alice, PIECES)
    waiting = generated_session(alice)  # the newest waiting case: next after the decision
    sent = sent_commands(page)
    log_in_by_keyboard(page, server_url)

    # The queue lists what waits for a decision first, newest first.
    first_rows = page.locator("table.sessions tbody tr td:first-child a")
    assert first_rows.nth(0).get_attribute("href") == f"/sessions/{waiting.pk}/"

    page.goto(f"{server_url}/sessions/{paused.pk}/")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector("#tokens .word >> nth=8")

    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    screenshot(page, "desk-keys-help-en")
    page.keyboard.press("Escape")
    assert page.locator("#keys-help").is_hidden()

    page.keyboard.press("j")  # to the pause: the last word before it
    assert page.evaluate(FOCUSED) == str(len(PIECES) - 1)
    page.keyboard.press("ArrowLeft")  # one word back, however many pieces it was written in
    assert page.evaluate(FOCUSED) == str(MORNING)
    assert page.evaluate(FOCUSED_WORD) == {"text": " morning", "pieces": 2}
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(FOCUSED) == str(MORNING - 1)
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUSED) == str(MORNING)
    # The word the keyboard is on shows its tip, and names it as its description.
    assert page.locator("#tip").is_visible() and "%" in page.locator("#tip").inner_text()
    described = "document.activeElement.closest('.word').getAttribute('aria-describedby')"
    assert page.evaluate(described) == "tip"

    page.keyboard.press("r")  # the rollback menu, to confirm, with the focus on its button
    assert page.locator("#token-menu").is_visible()
    assert page.locator("#token-menu").inner_text().count("word") == 2
    assert page.evaluate(FOCUSED) == "rollback-here"
    page.keyboard.press("Escape")
    assert page.locator("#token-menu").is_hidden()
    assert page.evaluate(FOCUSED) == str(MORNING)

    page.keyboard.press("e")  # replace the focused word: all of it
    assert page.locator("#edit-panel").is_visible()
    assert page.locator("#edit-selection").inner_text().strip() == "morning"
    assert page.evaluate(FOCUSED) == "edit-text"
    page.keyboard.press("Escape")
    assert page.locator("#edit-panel").is_hidden()

    page.keyboard.press("2")  # the second alternative, then on
    page.wait_for_function("() => true")
    page.wait_for_timeout(300)
    chosen = [c for c in sent if c.get("command") == "choose"]
    assert chosen and chosen[0]["token_id"] == ALTERNATIVES[1]["token_id"]

    page.goto(f"{server_url}/sessions/{decided.pk}/")
    page.wait_for_selector("#decision-panel:not([hidden])")
    page.keyboard.press("a")
    assert page.evaluate(FOCUSED) == "decision-comment"
    assert page.locator("#decision-hint").inner_text() == "Ctrl+Enter approves with this comment."
    page.keyboard.type("Checked from the keyboard.")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector('#status[data-status="completed"]')
    assert page.locator("#decided-by").inner_text().startswith("by alice, ")
    assert page.locator("#next-case").is_visible()
    page.keyboard.press("n")
    page.wait_for_url(f"{server_url}/sessions/{waiting.pk}/")


def test_rolling_back_to_a_word_from_the_keyboard_removes_all_of_its_pieces(
    page, server_url, alice
):
    paused = paused_session(alice, PIECES)
    sent = sent_commands(page)
    log_in_by_keyboard(page, server_url)
    page.goto(f"{server_url}/sessions/{paused.pk}/")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector("#tokens .word >> nth=8")
    # One stop per word: ten pieces, nine words.
    assert page.locator("#tokens .tok").count() == len(PIECES)
    assert page.locator("#tokens .word:not(.blank)").count() == len(PIECES) - 1

    page.keyboard.press("j")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("r")
    page.keyboard.press("Enter")  # "Roll back to here"
    page.wait_for_function("() => caesura.state.outbox.size === 0")  # answered
    assert [c["position"] for c in sent if c.get("command") == "rollback"] == [MORNING]
    # The worker is asked to remove both pieces of " morning" and what follows.
    edit = Edit.objects.get(session=paused, kind="truncate")
    assert (edit.start, edit.end) == (MORNING, len(PIECES))
