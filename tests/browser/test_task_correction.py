"""Correcting a session's task type on its page, in a real browser: alice says her paused
session is deterministic, not open; the page says so at once and after a reload, the audit
chain has it, and the line reads in Chinese and fits a phone."""

from __future__ import annotations

import pytest

from reviewer.models import AuditRecord, ReviewSession, TaskCorrection
from tests.browser.conftest import log_in, screenshot
from tests.browser.stored_sessions import paused_session

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def open_session(browser, server_url: str, session: ReviewSession, viewport, locale: str):
    context = browser.new_context(viewport=viewport, locale=locale)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector('#connection[data-state="connected"]')
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    assert errors == []
    return page


def correction_says(page, text: str) -> None:
    page.wait_for_function(
        "(t) => document.getElementById('task-correction').textContent === t", arg=text
    )


def test_alice_corrects_the_task_type_on_the_page(browser, server_url, alice):
    session = paused_session(alice)  # labelled "open" by the classifier
    page = open_session(browser, server_url, session, {"width": 1280, "height": 800}, "en-US")
    assert "Task type: Open (classified)" in page.inner_text("#task-type")
    assert page.input_value("#task-correct") == "open"
    assert page.inner_text("#task-correction") == ""

    page.select_option("#task-correct", "deterministic")
    page.click("#task-correct-save")
    correction_says(page, "Corrected to Deterministic by alice.")
    page.wait_for_selector("#notice:not([hidden])")
    assert "counts toward the classifier's accuracy" in page.inner_text("#notice")
    stored = TaskCorrection.objects.get(session=session)
    assert (stored.given, stored.corrected, stored.corrected_by) == (
        "open",
        "deterministic",
        "alice",
    )
    record = AuditRecord.objects.get(session=session, action="task_corrected")
    assert record.actor == "alice" and record.payload["corrected"] == "deterministic"
    assert ReviewSession.objects.get(pk=session.pk).task_type == "open"  # its decoding stays
    page.wait_for_selector("#timeline li:has-text('Task type corrected')")
    assert "Open → Deterministic" in page.inner_text("#timeline")
    page.locator("#task-correct-line").scroll_into_view_if_needed()
    screenshot(page, "task-correction-en")

    page.reload()  # the page's own data carries the correction
    page.wait_for_selector('#connection[data-state="connected"]')
    correction_says(page, "Corrected to Deterministic by alice.")
    assert page.input_value("#task-correct") == "deterministic"

    # Choosing "open" again confirms the classifier's label; space in the choice never pauses.
    page.select_option("#task-correct", "open")
    page.focus("#task-correct")
    page.keyboard.press(" ")
    page.click("#task-correct-save")
    correction_says(page, "Confirmed as Open by alice.")
    assert TaskCorrection.objects.get(session=session).agrees
    assert AuditRecord.objects.filter(session=session, action="task_corrected").count() == 2
    assert ReviewSession.objects.get(pk=session.pk).status == ReviewSession.PAUSED
    page.context.close()


@pytest.mark.parametrize(
    ("name", "viewport"),
    [
        ("task-correction-zh-hans", {"width": 1280, "height": 800}),
        ("task-correction-zh-hans-phone", PHONE),
    ],
)
def test_the_correction_reads_in_chinese_and_fits_a_phone(
    browser, server_url, alice, name, viewport
):
    session = paused_session(alice)
    page = open_session(browser, server_url, session, viewport, "zh-CN")
    assert "任务类型" in page.inner_text("#task-type")
    page.select_option("#task-correct", "deterministic")
    page.click("#task-correct-save")
    correction_says(page, "已由 alice 更正为“确定性”。")
    assert page.inner_text("#task-correct-save") == "保存任务类型"
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= viewport["width"], f"the page is {width} px wide"
    page.locator("#task-correct-line").scroll_into_view_if_needed()
    screenshot(page, name)
    page.context.close()


def test_the_dashboard_warns_of_drift_and_low_accuracy(browser, server_url, admin_user, alice):
    """Forty sessions from a domain the classifier never saw, a quarter of them corrected."""
    from tests.test_task_corrections import classified
    from tests.test_task_drift import SHIFTED

    for n, text in enumerate(SHIFTED):
        session = classified(alice, "open", text=text)
        if n % 4 == 0:
            TaskCorrection.objects.create(session=session, given="open", corrected="deterministic")
    for name, viewport, locale in (
        ("dashboard-task-drift-en", {"width": 1280, "height": 800}, "en-US"),
        ("dashboard-task-drift-zh-hans-phone", PHONE, "zh-CN"),
    ):
        context = browser.new_context(viewport=viewport, locale=locale)
        page = context.new_page()
        log_in(page, server_url, "root", "root-password-1")
        page.goto(f"{server_url}/dashboard/", timeout=60_000)
        card = page.locator("#task-classifier")
        assert card.locator("#task-drift[role=alert]").is_visible()
        assert card.locator("#task-retrain").is_visible()  # drift and 75 % < 88 % coincide
        assert card.locator("tr.drifted").count() >= 2
        if locale == "en-US":
            assert "75 % of the last 40 judged sessions" in card.inner_text()
        else:
            assert "漂移" in card.inner_text()
        card.scroll_into_view_if_needed()
        screenshot(page, name)
        context.close()
