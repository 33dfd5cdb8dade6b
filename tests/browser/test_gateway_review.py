"""The review gateway end to end: an application calls /v1/chat/completions with the real
openai SDK, a clinical policy pauses the real model, and a reviewer of the domain, in a real
browser, sees the pause arrive in the queue, claims it, swaps a glossary term, resumes and
approves; the SDK call returns exactly the reviewed text, and the audit and the redline name
the application, the reviewer and the edit. A second reviewer watches in Chinese on a phone.

Screenshots: artifacts/screenshots/gateway-{queue,session}-{en-desktop,zh-phone}.png."""

from __future__ import annotations

import functools
import threading

import openai
import pytest

from reviewer.lifecycle import application_keys
from reviewer.models import Domain, GlossaryTerm, ReviewSession
from reviewer.models.domain import AFTER_REVIEW
from tests.browser.conftest import screenshot
from tests.browser.test_queue_page import queue_page
from tests.browser.test_review_desk import PHONE
from tests.browser.test_review_ui import (
    CASE,
    SELECT_TEXT,
    page_text,
    wait_for_status,
    wait_for_text,
    wait_until_paused,
    ward_domain,
)
from tests.conftest import wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
]

# Greedy decoding of CASE under the clinical system prompt writes "... chest pain and high
# blood pressure since ..." within its first twenty tokens: the keyword policy pauses there.
BLOOD_PRESSURE = {
    "name": "Blood pressure",
    "kind": "keyword",
    "params": {"keywords": ["blood pressure"]},
}
MAX_TOKENS = 28


@pytest.fixture
def clinic(alice, bob) -> Domain:
    """The demo's clinical domain (prompt, glossary, a keyword policy), reviewed by alice and
    bob, delivering only after review, never approving by itself."""
    domain = ward_domain("Clinical note", (BLOOD_PRESSURE,))
    domain.delivery_mode = AFTER_REVIEW
    domain.auto_approve_unpaused = False
    domain.save()
    domain.reviewers.add(alice, bob)
    return domain


class Call(threading.Thread):
    """The application's blocking SDK call, waiting in its own thread for the review."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        super().__init__(daemon=True)
        self.client, self.model = client, model
        self.answer = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.answer = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": CASE}],
                max_tokens=MAX_TOKENS,
                temperature=0,
                seed=3,
            )
        except BaseException as error:  # reported by the test's thread
            self.error = error


def resume_until_generated(page, session_id: int) -> None:
    """Resume; should the policy fire again in what follows, resume past it too."""
    for _ in range(4):
        pauses = ReviewSession.objects.get(pk=session_id).pauses.count()
        page.click("#toggle-run")
        stopped = functools.partial(next_stop, session_id, pauses)
        status = wait_for(stopped, timeout=90, what="the next pause or the end")
        if status == "generated":
            wait_for_status(page, "generated")
            return
        wait_until_paused(page)
    raise AssertionError("the generation kept pausing")


def next_stop(session_id: int, pauses: int) -> str | None:
    """The status the session stopped in after a resume, once it stopped again."""
    session = ReviewSession.objects.get(pk=session_id)
    if session.status == "generated":
        return session.status
    if session.status == "paused" and session.pauses.count() > pauses:
        return session.status
    return None


def test_an_application_receives_exactly_what_its_reviewer_approved(
    browser, server_url, celery_worker_process, clinic, alice
):
    app, key = application_keys.create("Note drafter", [clinic], "root")
    term = GlossaryTerm.objects.get(glossary__domain=clinic, term="high blood pressure")
    client = openai.OpenAI(base_url=server_url + "/v1", api_key=key, max_retries=0, timeout=300)

    desk = queue_page(browser, server_url, "alice")
    phone = queue_page(browser, server_url, "bob", locale="zh-CN", viewport=PHONE)
    call = Call(client, f"caesura:{clinic.slug}")
    call.start()

    # The pause arrives in both queues without a reload.
    session = wait_for(
        lambda: ReviewSession.objects.filter(application=app).first(), what="the generation"
    )
    row = f"#queue-row-{session.pk}"
    for page in (desk, phone):
        page.wait_for_selector(f'{row}[data-claimable="1"] button[data-claim]', timeout=90_000)
    paused = ReviewSession.objects.get(pk=session.pk)
    assert paused.status == "paused" and "blood pressure" in paused.text
    assert paused.pauses.get().trigger == "Blood pressure"
    assert len(paused.generated_ids) <= 20
    assert "Note drafter" in desk.inner_text(row)
    screenshot(desk, "gateway-queue-en-desktop", full_page=True)
    screenshot(phone, "gateway-queue-zh-phone", full_page=True)

    # Alice claims it in the queue and opens it; bob's queue tells him who has it.
    desk.click(f"{row} button[data-claim]")
    desk.wait_for_selector(f"{row} button[data-release]")
    phone.wait_for_selector(f'{row}[data-claimable="0"]')
    assert "alice" in phone.inner_text(row)
    desk.click(f"{row} a[href='/sessions/{session.pk}/']")
    desk.wait_for_url(f"**/sessions/{session.pk}/")
    wait_until_paused(desk)
    assert desk.inner_text("#claim-holder").startswith("Claimed by you")
    assert page_text(desk) == paused.text
    desk.mouse.move(0, 0)
    screenshot(desk, "gateway-session-en-desktop")
    phone.goto(f"{server_url}/sessions/{session.pk}/")
    wait_until_paused(phone)
    assert "alice" in phone.inner_text("#claim-holder")
    screenshot(phone, "gateway-session-zh-phone", full_page=True)

    # She swaps the plain words for the glossary's term, resumes and approves.
    assert desk.evaluate(SELECT_TEXT, "high blood pressure")
    desk.wait_for_selector("#edit-panel:not([hidden])")
    desk.click(f'#glossary-terms button[data-term="{term.pk}"]')
    wait_for_text(desk, term.preferred)
    assert call.is_alive()  # nothing was delivered yet
    resume_until_generated(desk, session.pk)
    desk.fill("#decision-comment", "Coded as in the chart.")
    desk.click("#approve")
    wait_for_status(desk, "completed")

    call.join(60)
    assert call.error is None, call.error
    approved = ReviewSession.objects.get(pk=session.pk)
    content = call.answer.choices[0].message.content
    assert content == approved.text  # byte for byte
    assert term.preferred in content and "high blood pressure" not in content
    assert page_text(desk) == approved.text
    extra = call.answer.model_extra["caesura"]
    assert extra["session_id"] == session.pk and extra["edits"] == 1
    assert extra["review"]["reviewer"] == "alice"

    # The audit and the redline tell who asked, who reviewed, and what changed.
    audit = desk.request.get(f"{server_url}/sessions/{session.pk}/audit").json()["entries"]
    by_kind = {entry["kind"]: entry for entry in audit}
    assert by_kind["start"]["actor_id"] == app.actor == "app:Note drafter"
    assert by_kind["start"]["actor"] == "Note drafter (application)"
    assert by_kind["claim"]["actor"] == "alice"
    assert by_kind["approve"]["actor"] == "alice"
    edits = [e for e in audit if e["kind"].startswith("edit")]
    assert edits and all(e["actor"] == "alice" for e in edits)
    assert any(term.preferred in e["detail"] for e in edits)
    redline = desk.request.get(f"{server_url}/api/sessions/{session.pk}/redline?format=json").json()
    assert redline["text"] == content
    (change,) = redline["changes"]
    assert change["author"] == "alice" and change["inserted"] == term.preferred
    assert change["deleted"] == "high blood pressure"
    assert term.term in change["reason"] and "Blood pressure" in change["pause"]
    for page in (desk, phone):
        page.context.close()
