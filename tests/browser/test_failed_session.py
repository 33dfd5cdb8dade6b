"""A failed session in a real browser: the page offers Resume, and Resume runs it again."""

from __future__ import annotations

import pytest

from reviewer.models import ReviewSession
from tests.browser.conftest import log_in
from tests.browser.test_live_connection import WATCH_FOR_RESUME
from tests.session_factory import make_session

pytestmark = [
    pytest.mark.browser,
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def test_it_offers_resume_on_a_failed_session_and_resumes_it(page, server_url, alice):
    session = make_session(
        alice, status=ReviewSession.FAILED, error="RedisUnavailable: out of reach"
    )
    page.add_init_script(WATCH_FOR_RESUME)
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/")
    button = page.locator("#toggle-run")
    page.wait_for_function(
        "() => document.getElementById('connection').dataset.state === 'connected'"
    )
    assert button.inner_text() == "Resume" and button.is_enabled()
    # Offered from the first paint as what it is: a failed session, never a replayed pause.
    assert page.evaluate("() => window.__atReady.status") == "failed"
    assert page.locator("#decided-text").inner_text() == "failed: RedisUnavailable: out of reach"
    seen = page.evaluate("() => window.__offered")
    assert seen and all(entry.endswith("enabled Resume") for entry in seen), seen

    button.click()
    page.wait_for_function("() => document.getElementById('status').dataset.status === 'running'")
    assert page.locator("#decided-panel").is_hidden()
    session.refresh_from_db()
    assert (session.status, session.error) == (ReviewSession.RUNNING, "")
