"""The claim bar on a gateway session's page, in a real browser, without the model: alice claims
the paused generation from its page, bob's page tells him alice has it and his edits are refused
with the reason, and when alice releases it both pages offer it again."""

from __future__ import annotations

import pytest
from django.utils import timezone

from reviewer.models import AuditRecord, ReviewSession
from tests.browser.conftest import log_in, screenshot
from tests.browser.stored_sessions import TEXT, paused_session
from tests.floor_factory import note_drafter

# The stored prompt is encoded with the prepared model's tokenizer.
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def waiting(alice, bob) -> ReviewSession:
    """A paused generation from the note drafter, in the domain alice and bob review."""
    session = paused_session(alice)
    session.domain.reviewers.add(alice, bob)
    ReviewSession.objects.filter(pk=session.pk).update(
        owner=None, application=note_drafter(), waiting_since=timezone.now()
    )
    return session


def session_page(browser, server_url: str, user: str, session: ReviewSession):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, server_url, user, f"{user}-password-1")
    page.goto(f"{server_url}/sessions/{session.pk}/", timeout=60_000)  # a busy machine
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    page.wait_for_selector('#connection[data-state="connected"]')
    return page


def holder_says(page, text: str) -> None:
    page.wait_for_function(
        "(t) => document.getElementById('claim-holder').textContent.startsWith(t)", arg=text
    )


def test_it_claims_from_the_page_refuses_another_reviewer_and_releases(
    browser, server_url, waiting
):
    alice = session_page(browser, server_url, "alice", waiting)
    bob = session_page(browser, server_url, "bob", waiting)
    for page in (alice, bob):
        assert page.inner_text("#claim-bar").startswith("From the application Note drafter")
        holder_says(page, "Unclaimed: it waits in the domain's queue.")
        assert page.inner_text("#claim-toggle") == "Claim"

    alice.click("#claim-toggle")
    holder_says(alice, "Claimed by you until ")
    assert "Invalid" not in alice.inner_text("#claim-holder")
    assert alice.inner_text("#claim-toggle") == "Release"
    holder_says(bob, "Claimed by alice: only they can work on it now.")  # live, no reload
    assert bob.is_hidden("#claim-toggle")
    # Resume and the decision are alice's now: greyed on bob's page, saying why; hers are live.
    for name in ("#toggle-run", "#approve", "#reject"):
        bob.wait_for_selector(f"{name}:disabled")
        assert (
            bob.get_attribute(name, "title")
            == "Claim this generation to resume it or decide on it."
        )
        alice.wait_for_selector(f"{name}:enabled")
    # ... and in words beside them, which a keyboard or a phone reaches too
    assert bob.inner_text("#claim-first") == "Claim this generation to resume it or decide on it."
    assert bob.get_attribute("#approve", "aria-describedby") == "claim-first"
    assert alice.is_hidden("#claim-first")
    claimed = ReviewSession.objects.get(pk=waiting.pk)
    assert claimed.claimed_by.username == "alice"

    # Bob's edit controls stay in reach, and the server tells him why it refuses them.
    bob.click("#alternatives button.alt >> nth=0")
    bob.wait_for_selector("#notice.bad:not([hidden])")
    assert bob.inner_text("#notice") == f"Session {waiting.pk} is claimed by alice"
    for page in (alice, bob):  # the bar as rendered from the page's data
        page.reload()
        page.wait_for_selector('#connection[data-state="connected"]')
    holder_says(bob, "Claimed by alice")
    holder_says(alice, "Claimed by you until ")
    assert "Invalid" not in alice.inner_text("#claim-holder")
    unchanged = ReviewSession.objects.get(pk=waiting.pk)
    assert (unchanged.status, unchanged.text) == ("paused", TEXT)
    assert not unchanged.edits.exists()

    alice.click("#claim-toggle")
    holder_says(alice, "Unclaimed")
    holder_says(bob, "Unclaimed")
    for page in (alice, bob):
        page.wait_for_selector("#claim-toggle:not([hidden])")
        assert page.inner_text("#claim-toggle") == "Claim"
        page.wait_for_selector("#approve:disabled")  # nobody holds it: claim first
    assert ReviewSession.objects.get(pk=waiting.pk).claimed_by is None
    actions = AuditRecord.objects.filter(session=waiting).values_list("action", "actor")
    assert [a for a in actions if a[0] in ("claim", "release")] == [
        ("claim", "alice"),
        ("release", "alice"),
    ]
    # After the release, bob's "c" claims it from his page.
    bob.keyboard.press("c")
    holder_says(bob, "Claimed by you until ")
    holder_says(alice, "Claimed by bob")
    for page in (alice, bob):
        page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_it_tells_a_reviewer_on_a_chinese_page_who_holds_the_claim_in_chinese(
    browser, server_url, waiting, alice, width
):
    from reviewer.lifecycle import claims

    claims.claim(alice, waiting.pk)
    context = browser.new_context(viewport={"width": width, "height": 800}, locale="zh-CN")
    context.set_default_timeout(15_000)
    bob = context.new_page()
    log_in(bob, server_url, "bob", "bob-password-1")
    bob.goto(f"{server_url}/sessions/{waiting.pk}/", timeout=60_000)
    bob.wait_for_selector('#connection[data-state="connected"]')
    bob.click("#alternatives button.alt >> nth=0")
    bob.wait_for_selector("#notice.bad:not([hidden])")
    assert bob.inner_text("#notice") == f"会话 {waiting.pk} 已由 alice 认领"
    assert bob.inner_text("#claim-first") == "请先认领此生成，才能继续生成或作出决定。"
    screenshot(bob, "claim-refused-zh" + ("-phone" if width < 600 else ""))
    assert not ReviewSession.objects.get(pk=waiting.pk).edits.exists()
