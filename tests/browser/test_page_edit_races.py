"""Edits on the session page while the text changes under them, in a real browser: the
session's worker is busy (no worker takes its edits), and the test applies each edit queued
for it as the worker reports it (its ``edited`` or ``truncated`` event), when it chooses. A word's menu or the editor opened before an edit
lands follows its words or closes saying so; a decision or a rollback given while an edit is
still on its way waits for it instead of being refused; after a replacement or a rollback the
focus is on the word where the text changed."""

from __future__ import annotations

import pytest

from reviewer import lifecycle
from reviewer.models import Edit, ReviewSession
from tests.browser.conftest import log_in, screenshot
from tests.browser.session_page_support import PIECE, apply_edits, named, sent_commands
from tests.browser.session_page_support import busy_worker as holding
from tests.browser.stored_sessions import ALTERNATIVES, TEXT, paused_session
from tests.session_factory import stub_worker

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def busy_worker():
    with holding() as hold:
        yield hold


TEXT_ON_PAGE = "() => caesura.state.tokens.map((t) => (t ? t.text : '')).join('')"
CHANGED = "The text changed since this edit was made; select the span again"
# A word's text, from the tokens it spans (its element also holds the redline's deleted words).
WORD_TEXT = """(w) => caesura.state.tokens.slice(+w.dataset.first, +w.dataset.last + 1)
  .map((t) => (t ? t.text : '')).join('')"""
FOCUSED_WORD = f"""() => {{
  const w = document.activeElement?.closest?.('#tokens .word');
  return w ? ({WORD_TEXT})(w) : null;
}}"""


def open_session(page, server_url: str, session: ReviewSession) -> None:
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector('#connection[data-state="connected"]')


WORD_FIRST = f"""(text) => {{
  const found = [...document.querySelectorAll('#tokens .word')].find((w) => ({WORD_TEXT})(w) === text);
  return found ? found.dataset.first : null;
}}"""


def word(page, text: str):
    """The word drawn with exactly this text (its leading space included)."""
    first = page.evaluate(WORD_FIRST, text)
    assert first is not None, f"no word {text!r} in {page.evaluate(TEXT_ON_PAGE)!r}"
    return page.locator(f'#tokens .word[data-first="{first}"]')


def answered(page) -> None:
    page.wait_for_function("() => caesura.state.outbox.size === 0")


def replace_from_the_keyboard(page, old: str, new: str) -> None:
    """Focus the word, `e`, the new words, Enter: the edit is queued (answered)."""
    word(page, old).focus()
    page.keyboard.press("e")
    page.keyboard.press("Control+a")
    page.keyboard.type(new)
    page.keyboard.press("Enter")
    answered(page)


def test_a_words_menu_opened_before_an_edit_lands_rolls_back_to_that_word(
    page, server_url, alice, busy_worker
):
    session = busy_worker(
        paused_session(alice)
    )  # "The patient reports chest pain since this morning."
    sent = sent_commands(page)
    open_session(page, server_url, session)

    replace_from_the_keyboard(page, "The", "On examination today, the")
    # Before the worker has applied it, the reviewer opens the last word's menu.
    word(page, " morning").click(button="right")
    assert page.locator("#token-menu").is_visible()
    assert apply_edits(session.pk)
    page.wait_for_function(
        "(t) => (" + TEXT_ON_PAGE + ")() === t", arg="On examination today, the" + TEXT[3:]
    )
    # The menu follows its word, which now stands further on.
    assert page.locator("#token-menu").is_visible()
    page.wait_for_timeout(100)  # the word drawn anew
    menu_top = page.locator("#token-menu").bounding_box()["y"]
    below = word(page, " morning").bounding_box()
    assert menu_top >= below["y"] + below["height"]

    page.click("#rollback-here")
    answered(page)
    assert apply_edits(session.pk)
    kept = "On examination today, the patient reports chest pain since this"
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")() === t", arg=kept)
    assert ReviewSession.objects.get(pk=session.pk).text == kept
    [rollback] = named(sent, "rollback")
    assert rollback["position"] == len(PIECE.findall(kept))  # " morning", not what stood at 7
    assert not page.locator("#notice.bad").is_visible()


def test_the_editor_follows_another_edit_before_its_selection_or_closes_on_one_over_it(
    page, server_url, alice, busy_worker, monkeypatch
):
    stub_worker(monkeypatch)  # for the other tab's edits, made here
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)

    word(page, " pain").focus()
    page.keyboard.press("e")
    assert page.locator("#edit-selection").inner_text() == " pain"
    # Another tab of the reviewer's replaces the first word, and the worker applies it.
    lifecycle.edit(alice, session.pk, 0, 3, "Today, the")
    assert apply_edits(session.pk)
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")().startsWith(t)", arg="Today, the")
    assert page.locator("#edit-panel").is_visible()
    assert page.locator("#edit-selection").inner_text() == " pain"
    page.fill("#edit-text", " ache")
    page.press("#edit-text", "Enter")
    answered(page)
    assert apply_edits(session.pk)
    fixed = "Today, the patient reports chest ache since this morning."
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")() === t", arg=fixed)
    assert ReviewSession.objects.get(pk=session.pk).text == fixed
    assert named(sent, "edit")[-1]["start"] == fixed.index(" ache")

    # An edit over the selected words: the editor closes, and says why.
    word(page, " ache").focus()
    page.keyboard.press("e")
    lifecycle.edit(alice, session.pk, fixed.index(" chest"), fixed.index(" since"), " a headache")
    assert apply_edits(session.pk)
    page.wait_for_selector("#edit-panel", state="hidden")
    assert page.inner_text("#notice") == CHANGED
    assert page.evaluate(FOCUSED_WORD) is not None  # back on the text, for the keys
    assert len(named(sent, "edit")) == 1


def test_a_replacement_refuses_to_go_once_the_selected_words_have_changed(
    page, server_url, alice, busy_worker
):
    """The last guard: the words at the selection are read again as the command goes."""
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    word(page, " pain").focus()
    page.keyboard.press("e")
    # The page's tokens change without an event the editor could follow (a stand-in for any
    # change it missed): " pain" is no longer where it was selected.
    page.evaluate(
        "() => { caesura.state.tokens[4] = { ...caesura.state.tokens[4], text: ' ache' }; }"
    )
    page.fill("#edit-text", " ache")
    page.press("#edit-text", "Enter")
    page.wait_for_selector("#edit-panel", state="hidden")
    assert page.inner_text("#notice") == CHANGED
    assert named(sent, "edit") == []


def test_approving_right_after_an_edit_waits_for_it_and_is_not_lost(
    page, server_url, alice, busy_worker
):
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)

    replace_from_the_keyboard(page, " chest", " upon examination chest")
    page.fill("#decision-comment", "Corrected and approved.")
    page.click("#approve")
    # Held until the worker has applied the edit, shown as on its way; no refusal.
    chip = page.locator('#pending li[data-command="approve"]')
    chip.wait_for()
    assert chip.get_attribute("data-state") == "held"
    assert chip.inner_text() == "Approve: sent, waiting for the server…"
    assert page.locator("#approve").is_disabled()
    assert named(sent, "approve") == []
    assert not page.locator("#notice.bad").is_visible()
    screenshot(page, "fix-page-approve-held")

    assert apply_edits(session.pk)
    page.wait_for_selector('#status[data-status="completed"]')
    assert len(named(sent, "approve")) == 1
    assert not page.locator("#notice.bad").is_visible()
    decided = ReviewSession.objects.get(pk=session.pk)
    assert decided.status == ReviewSession.COMPLETED
    assert decided.text == "The patient reports upon examination chest pain since this morning."


def test_a_command_refused_for_an_edit_the_page_did_not_know_of_goes_once_it_is_applied(
    page, server_url, alice, busy_worker, monkeypatch
):
    stub_worker(monkeypatch)  # for the other tab's edit, made here
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    lifecycle.edit(alice, session.pk, 0, 3, "A")  # another tab's, still on its way

    page.click("#alternatives button.alt >> nth=0")  # refused with 409: tried again, not shown
    page.wait_for_function("() => [...caesura.state.outbox.values()].some((e) => e.refusals > 0)")
    page.wait_for_selector('#pending li[data-command="choose"][data-state="held"]')
    assert not page.locator("#notice.bad").is_visible()
    assert apply_edits(session.pk)
    page.wait_for_function(
        "() => caesura.state.outbox.size === 0 && caesura.state.status === 'running'"
    )
    assert not page.locator("#notice.bad").is_visible()
    chosen = Edit.objects.filter(session=session, kind="choose").get()
    assert chosen.token_id == ALTERNATIVES[0]["token_id"]
    assert len([c for c in named(sent, "choose")]) >= 2  # the same command_id, sent again
    assert len({c["command_id"] for c in named(sent, "choose")}) == 1


def test_a_replacement_refused_for_another_tabs_edit_goes_on_the_words_selected_once_it_lands(
    page, server_url, alice, busy_worker, monkeypatch
):
    stub_worker(monkeypatch)  # for the other tab's edit, made here
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    lifecycle.edit(alice, session.pk, 0, 3, "Today, the")  # another tab's, still on its way

    word(page, " pain").focus()
    page.keyboard.press("e")
    page.fill("#edit-text", " ache")
    page.press("#edit-text", "Enter")  # refused with 409 (the other edit): held, not shown
    page.wait_for_selector('#pending li[data-command="edit"][data-state="held"]')
    assert page.locator("#edit-error").is_hidden()
    assert apply_edits(session.pk)  # the other tab's lands; the replacement goes, carried on
    answered(page)
    assert apply_edits(session.pk)
    fixed = "Today, the patient reports chest ache since this morning."
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")() === t", arg=fixed)
    assert ReviewSession.objects.get(pk=session.pk).text == fixed
    edits = named(sent, "edit")
    assert len({c["command_id"] for c in edits}) == 1
    assert (edits[0]["start"], edits[-1]["start"]) == (TEXT.index(" pain"), fixed.index(" ache"))
    assert not page.locator("#notice.bad").is_visible()


def test_a_replacement_made_offline_goes_on_its_words_after_another_tabs_edit_landed(
    page, server_url, alice, busy_worker, monkeypatch
):
    stub_worker(monkeypatch)  # for the other tab's edit, made here
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)
    page.context.set_offline(True)
    page.evaluate("() => caesura.drop()")
    page.wait_for_selector('#connection:not([data-state="connected"])', state="attached")

    word(page, " pain").focus()
    page.keyboard.press("e")
    page.fill("#edit-text", " ache")
    page.press("#edit-text", "Enter")
    page.wait_for_selector('#pending li[data-command="edit"][data-state="queued"]')
    # Meanwhile another tab replaces the first word, and the worker applies it: this page
    # hears of it only after its edit went again, with the offsets it was made on.
    lifecycle.edit(alice, session.pk, 0, 3, "Today, the")
    assert apply_edits(session.pk)
    page.context.set_offline(False)
    answered(page)
    assert apply_edits(session.pk)
    fixed = "Today, the patient reports chest ache since this morning."
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")() === t", arg=fixed)
    assert ReviewSession.objects.get(pk=session.pk).text == fixed
    edits = named(sent, "edit")
    # Refused on the text it was made on, then read again where its words now stand.
    assert [(c["start"], c["seen_length"]) for c in edits] == [
        (TEXT.index(" pain"), len(TEXT)),
        (fixed.index(" ache"), len(fixed) - len(" ache") + len(" pain")),
    ]
    assert {c["seen"] for c in edits} == {" pain"}
    assert len({c["command_id"] for c in edits}) == 1
    assert not page.locator("#notice.bad").is_visible()


def test_a_rollback_right_after_an_edit_waits_for_it_and_rolls_back_to_the_word_chosen(
    page, server_url, alice, busy_worker
):
    session = busy_worker(paused_session(alice))
    sent = sent_commands(page)
    open_session(page, server_url, session)

    replace_from_the_keyboard(page, "The", "On examination today, the")
    word(page, " since").focus()
    page.keyboard.press("r")
    page.keyboard.press("Enter")  # "Roll back to here", before the edit is applied
    assert page.evaluate(FOCUSED_WORD) == " pain"  # the word before, which stays
    page.wait_for_selector('#pending li[data-command="rollback"][data-state="held"]')
    assert named(sent, "rollback") == []
    assert apply_edits(session.pk)  # the replacement: the rollback goes, carried through it
    answered(page)
    assert apply_edits(session.pk)
    kept = "On examination today, the patient reports chest pain"
    page.wait_for_function("(t) => (" + TEXT_ON_PAGE + ")() === t", arg=kept)
    assert ReviewSession.objects.get(pk=session.pk).text == kept
    assert named(sent, "rollback")[0]["position"] == len(PIECE.findall(kept))
    # The replacement landing first did not take the focus back to where it began.
    page.wait_for_function("(w) => (" + FOCUSED_WORD + ")() === w", arg=" pain")
    assert not page.locator("#notice.bad").is_visible()


def test_the_focus_stays_on_the_text_after_a_replacement_and_a_rollback(
    page, server_url, alice, busy_worker
):
    session = busy_worker(paused_session(alice))
    open_session(page, server_url, session)

    replace_from_the_keyboard(page, " reports", " says")
    assert page.evaluate(FOCUSED_WORD) == " reports"  # where the change begins, at once
    assert apply_edits(session.pk)
    page.wait_for_function("() => caesura.state.tokens[2].text === ' says'")
    page.wait_for_function("(w) => (" + FOCUSED_WORD + ")() === w", arg=" says")
    page.keyboard.press("ArrowRight")  # the keys go on from there
    assert page.evaluate(FOCUSED_WORD) == " chest"

    page.keyboard.press("End")
    page.keyboard.press("r")
    page.keyboard.press("Enter")
    answered(page)
    assert page.evaluate(FOCUSED_WORD) == " morning"
    assert apply_edits(session.pk)
    page.wait_for_function("() => caesura.state.tokens.length === 8")
    page.wait_for_function("(w) => (" + FOCUSED_WORD + ")() === w", arg=" morning")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(FOCUSED_WORD) == " this"
