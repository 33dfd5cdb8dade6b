"""A generation from an application, decided on its page in a real browser: the claim bar says
who reviewed it at once, from the claim the page holds live, without a reload."""

from __future__ import annotations

import pytest
from django.utils import timezone

from reviewer.models import ReviewSession
from tests.browser.conftest import log_in, screenshot
from tests.browser.stored_sessions import paused_session
from tests.floor_factory import note_drafter

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]


def test_the_claim_bar_names_the_reviewer_once_the_generation_is_decided_on_the_page(
    page, server_url, alice
):
    session = paused_session(alice)
    session.domain.reviewers.add(alice)
    ReviewSession.objects.filter(pk=session.pk).update(
        owner=None, application=note_drafter(), waiting_since=timezone.now()
    )
    log_in(page, server_url, "alice", "alice-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector('#connection[data-state="connected"]')
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    assert page.inner_text("#claim-holder").startswith("Unclaimed")

    page.keyboard.press("c")
    page.wait_for_function(
        "() => document.getElementById('claim-holder').textContent.startsWith('Claimed by you')"
    )
    page.fill("#decision-comment", "Reads well.")
    page.click("#approve")
    page.wait_for_selector('#status[data-status="completed"]')
    page.wait_for_timeout(500)  # the claim's and the status's events have come too
    assert page.inner_text("#claim-holder") == "Reviewed by alice."
    screenshot(page, "fix-page-claim-reviewed")
    page.reload()  # as rendered: the same
    page.wait_for_selector("#decided-panel:not([hidden])")
    assert page.inner_text("#claim-holder") == "Reviewed by alice."
