"""The queue in a real browser: two reviewers of a domain have their queue open, a gateway
generation pauses, it appears live in both with the count in the tab's title, one claims it and
the other sees who has it. Also axe-core, a browser notification once allowed, and screenshots
(artifacts/screenshots/queue-*.png: English desktop, Chinese at phone width)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession
from tests.browser.conftest import VIEWPORT, log_in, screenshot
from tests.browser.test_review_desk import PHONE, axe_violations
from tests.floor_factory import gateway_session, make_floor
from tests.session_factory import clinical_notes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
S = ReviewSession

# Bob has allowed notifications; the page's own Notification is replaced by one that records.
RECORD_NOTIFICATIONS = """
window.shown = [];
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options) { window.shown.push(options.body); }
};
"""


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="carol-password-1")


@pytest.fixture
def floor(alice, bob, carol):
    make_floor(alice, bob, carol)
    domain = clinical_notes()
    domain.review_sla_minutes = 15
    domain.save()


def queue_page(browser, server_url, user: str, locale="en-US", viewport=VIEWPORT, script=None):
    context = browser.new_context(viewport=viewport, locale=locale)
    context.set_default_timeout(15_000)
    if script:
        context.add_init_script(script)
    page = context.new_page()
    log_in(page, server_url, user, f"{user}-password-1")
    page.wait_for_selector('#connection[data-state="connected"]')
    return page


def pause(session: ReviewSession) -> None:
    with transaction.atomic():
        transitions.set_status(session, S.PAUSED)  # what the worker's pause report does


def elsewhere(work) -> None:
    """Playwright's loop runs in the test's thread, where the broadcast cannot: as a worker
    would, change the session from another thread."""

    def run():
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def title_is(page, title: str) -> None:
    page.wait_for_function("(t) => document.title === t", arg=title)


def test_a_pause_reaches_both_queues_live_and_one_claim_wins(browser, server_url, floor):
    late = gateway_session(waited_min=20)  # past the SLA before anyone looked
    alice = queue_page(browser, server_url, "alice")
    bob = queue_page(browser, server_url, "bob", script=RECORD_NOTIFICATIONS)
    title_is(alice, "(1) Queue · Caesura")
    session = gateway_session(S.RUNNING)
    elsewhere(lambda: pause(session))
    row = f"#queue-row-{session.pk}"
    for page in (alice, bob):
        page.wait_for_selector(f'{row}[data-claimable="1"] button[data-claim]')
        title_is(page, "(2) Queue · Caesura")
    assert bob.evaluate("window.shown") == [
        f"A pause waits in Clinical notes: session {session.pk}"
    ]
    assert "A pause waits" in alice.inner_text("#queue-notice")
    assert alice.inner_text(f"#queue-row-{late.pk} .sla").endswith("past the 15 min SLA")
    assert alice.is_hidden(f"{row} .sla")
    screenshot(alice, "queue-en-desktop", full_page=True)

    alice.click(f"{row} button[data-claim]")
    alice.wait_for_selector(f"{row} button[data-release]")
    assert "Claimed by you" in alice.inner_text(row)
    bob.wait_for_selector(f'{row}[data-claimable="0"]')
    assert "Claimed by alice" in bob.inner_text(row)
    title_is(bob, "(1) Queue · Caesura")  # alice's now: only the late one waits for bob
    bob.keyboard.press("c")  # claims the first claimable one: the late item
    bob.wait_for_selector(f"#queue-row-{late.pk} button[data-release]")
    title_is(alice, "(1) Queue · Caesura")
    assert axe_violations(alice) == []
    for page in (alice, bob):
        page.context.close()


def test_the_queue_in_chinese_at_phone_width(browser, server_url, floor, bob):
    from reviewer import lifecycle

    gateway_session(waited_min=20)
    claimed = gateway_session(waited_min=2)
    elsewhere(lambda: lifecycle.claim(bob, claimed.pk))
    gateway_session(S.GENERATED, waited_min=75)
    page = queue_page(browser, server_url, "alice", locale="zh-CN", viewport=PHONE)
    assert page.title().endswith("队列 · Caesura")
    assert "已超出 15 分钟的 SLA" in page.inner_text("#queue")
    assert "已由 bob 认领" in page.inner_text("#queue")
    screenshot(page, "queue-zh-phone", full_page=True)
    assert axe_violations(page) == []
    page.context.close()
