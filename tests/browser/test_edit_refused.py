"""An edit the worker refuses, on a session page in a real browser: the page's notice says why
in the page's language (the socket translates the engine's English message), on a Chinese
page at desktop and phone width and on an English one."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from django.db import connections

from reviewer import lifecycle
from reviewer.models import Edit, ReviewSession
from reviewer.worker import runtime
from tests.browser.conftest import log_in, screenshot
from tests.browser.stored_sessions import paused_session
from tests.session_factory import stub_worker

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

CHANGED_ZH = "错误：提交此编辑后文本已有改动；请重新选择该片段"
CHANGED_EN = "Error: The text changed since this edit was made; select the span again"


def refuse_pending_edit(session_id: int) -> None:
    moved = SimpleNamespace(text="Something else was written meanwhile.")
    try:
        applied = runtime.apply_pending_edits(ReviewSession.objects.get(pk=session_id), moved)
        assert applied is None
    finally:
        connections.close_all()  # this thread's


@pytest.mark.parametrize(
    ("locale", "width", "told", "shot"),
    [
        ("zh-CN", 1280, CHANGED_ZH, "edit-refused-zh"),
        ("zh-CN", 390, CHANGED_ZH, "edit-refused-zh-phone"),
        ("en-US", 1280, CHANGED_EN, "edit-refused-en"),
    ],
)
def test_it_tells_the_page_why_the_worker_refused_an_edit_in_its_language(
    browser, server_url, alice, monkeypatch, locale, width, told, shot
):
    session = paused_session(alice)
    context = browser.new_context(viewport={"width": width, "height": 800}, locale=locale)
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector('#connection[data-state="connected"]')

    # The edit waits for a worker (none is asked here); when one comes to it, the text it
    # was made on has changed: the worker refuses it, as apply_pending_edits does.
    stub_worker(monkeypatch)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # reading down the page
    lifecycle.edit(alice, session.pk, 0, 2, "X")
    # Refused off Playwright's thread: its event loop would keep the event from being sent.
    worker = threading.Thread(target=refuse_pending_edit, args=(session.pk,))
    worker.start()
    worker.join()

    page.wait_for_selector("#notice.bad:not([hidden])")
    assert page.inner_text("#notice") == told
    notice = page.locator("#notice").bounding_box()
    if width < 600:  # on a phone: in view, just above the Resume bar, wherever the page is
        bar = page.locator("#run-controls").bounding_box()
        assert notice["y"] > 0 and notice["y"] + notice["height"] <= bar["y"]
    screenshot(page, shot)
    refused = Edit.objects.get(session=session)
    assert refused.error.startswith("The text changed") and not refused.applied
    context.close()
