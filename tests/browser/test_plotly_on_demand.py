"""The session page runs Plotly (4.8 MB) only when it first draws a figure: not while a
generating session's page opens; at once where a figure is on screen, and while idle on the
page of a session that is not generating."""

from __future__ import annotations

import pytest

from reviewer.models import ReviewSession
from tests.browser.conftest import log_in, show_live_heatmap
from tests.browser.stored_sessions import WORDS, new_session, paused_session, store, tokens

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PLOTLY_RAN = "() => typeof window.Plotly === 'object'"
PLOTLY_SCRIPTS = "() => document.querySelectorAll('script[src*=plotly]').length"


def running_session(owner) -> ReviewSession:
    session = new_session(owner, ReviewSession.RUNNING, WORDS)
    store(session, "status", {"status": ReviewSession.RUNNING})
    tokens(session, WORDS)
    return session


def test_it_opens_a_generating_session_without_running_plotly(page, server_url, alice):
    session = running_session(alice)
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_function(f"() => caesura.state.tokens.length === {len(WORDS)}")
    page.wait_for_timeout(1500)  # idle time in which a page of a paused session loads it
    assert page.evaluate(PLOTLY_RAN) is False
    assert page.evaluate(PLOTLY_SCRIPTS) == 0
    show_live_heatmap(page)  # the figure comes on screen: Plotly runs, and draws it
    assert page.evaluate(PLOTLY_RAN) is True
    assert page.evaluate(PLOTLY_SCRIPTS) == 1


def test_it_loads_plotly_while_idle_on_a_paused_session(page, server_url, alice):
    session = paused_session(alice)
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_function(PLOTLY_RAN)
    page.click("#attention-expert summary")
    page.wait_for_selector("#pause-heatmap .main-svg")
    assert page.evaluate(PLOTLY_SCRIPTS) == 1  # run once, whatever asked for it


def test_it_says_so_when_plotly_does_not_load_and_tries_again(page, server_url, alice):
    session = running_session(alice)
    log_in(page, server_url, "alice", "alice-password-1")
    page.route("**/vendor/plotly.min.js", lambda route: route.abort())
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_function(f"() => caesura.state.tokens.length === {len(WORDS)}")
    page.locator("#live-attention-card").scroll_into_view_if_needed()
    notice = page.locator("#notice.bad")
    notice.wait_for()
    assert "heatmaps could not be drawn" in notice.inner_text()
    assert page.evaluate(PLOTLY_RAN) is False
    page.unroute("**/vendor/plotly.min.js")
    page.check("#live-template")  # the next drawing asks for Plotly again
    show_live_heatmap(page)
    assert page.evaluate(PLOTLY_RAN) is True
