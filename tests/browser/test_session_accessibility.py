"""The session page passes axe-core in every state a reviewer meets it in: live, paused,
generated and decided, each with a text long enough that its attention heatmaps scroll in
their boxes (a box the keyboard cannot reach was the violation once)."""

from __future__ import annotations

import pytest

from reviewer.models import ReviewSession
from tests.browser.conftest import log_in, show_live_heatmap
from tests.browser.stored_sessions import WORDS, new_session, paused_session, store, tokens
from tests.browser.test_review_desk import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]
S = ReviewSession
LONG = WORDS * 4  # 36 words: more rows than the live heatmap's box shows at once
SCROLLS = "(e) => e.scrollHeight > e.clientHeight"


def long_session(owner, status: str) -> ReviewSession:
    if status == S.PAUSED:
        return paused_session(owner, LONG)
    session = new_session(owner, status, LONG, decision_comment="Reads well.")
    store(session, "status", {"status": S.RUNNING})
    tokens(session, LONG)
    if status != S.RUNNING:
        store(session, "finish", {"reason": "max_tokens", "text": "".join(LONG)})
        store(session, "status", {"status": S.GENERATED})
    if status == S.COMPLETED:
        store(session, "status", {"status": S.COMPLETED})
    session.refresh_from_db()
    return session


@pytest.mark.parametrize("status", [S.RUNNING, S.PAUSED, S.GENERATED, S.COMPLETED])
def test_the_session_page_has_no_serious_axe_violation(page, server_url, alice, status):
    session = long_session(alice, status)
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_function(
        "(n) => caesura.state.live && caesura.state.tokens.length === n", arg=len(LONG)
    )
    show_live_heatmap(page)
    if status == S.PAUSED:
        page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
        page.click("#attention-expert summary")
        page.wait_for_selector("#pause-heatmap .main-svg")
    assert page.locator("#live-attention-card > .plot-scroll").evaluate(SCROLLS)
    assert axe_violations(page) == []
