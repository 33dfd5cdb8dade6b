"""An admin sets up a keyword policy in the admin, tries it on sample text, and a new
session in that domain pauses on it: a real browser, a real server, a real worker. An admin
trying a drift policy sees over which stored sessions it could be replayed, and why.

The browser, the server and the worker come from tests/browser/conftest.py and
tests/conftest.py."""

from __future__ import annotations

import os
import re

import pytest

from reviewer.models import Domain, PausePolicy, ReviewSession
from tests.browser.conftest import VIEWPORT, screenshot
from tests.conftest import wait_for
from tests.test_policy_calibration import drift, stored_session

# Playwright's sync API runs an event loop in this thread; the ORM calls here are still
# plain synchronous calls, made between browser actions.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
]

POLICY_NAME = "Watch words"
KEYWORDS = ["patient", "the"]  # words a clinical note can hardly avoid for long
SESSION = {
    "domain": "Plain",
    "input": "Write a short clinical note about a patient with chest pain.",
    "seed": 5,
    "max_new_tokens": 40,
}


def log_in_to_admin(page, base: str, next_path: str) -> None:
    page.goto(f"{base}/admin/login/?next={next_path}")
    page.fill("#id_username", "root")
    page.fill("#id_password", "root-password-1")
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_path}")


def create_keyword_policy(page, base: str) -> None:
    log_in_to_admin(page, base, "/admin/reviewer/pausepolicy/add/")
    page.click("a[data-kind=keyword]")
    page.wait_for_selector("#id_param_keywords")
    page.fill("#id_name", POLICY_NAME)
    page.select_option("#id_domain", label="Plain")
    page.fill("#id_param_keywords", "\n".join(KEYWORDS))
    screenshot(page, "admin-keyword-policy-form")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r"/pausepolicy/\d+/change/"))


def try_on_sample(page, sample: str) -> None:
    page.click("a.trylink")
    page.fill("#id_text", sample)
    page.click("input[name=_try]")
    page.wait_for_selector("#trial-summary")
    screenshot(page, "admin-try-policy")


def api_post(page, base: str, path: str, body: dict) -> dict:
    """POST to the JSON API as the logged-in browser user (cookie and CSRF token).

    The session starts through the server rather than `services` here: Playwright's event
    loop runs in this thread, and the services' event broadcast cannot run inside it.
    """
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    answer = page.request.post(
        base + path, data=body, headers={"X-CSRFToken": cookies["csrftoken"]}
    )
    assert answer.ok, f"{path}: {answer.status} {answer.text()}"
    return answer.json()


def test_it_creates_tries_and_applies_a_keyword_policy(
    page,
    server_url,
    celery_worker_process,
    admin_user,
    plain_domain,
):
    create_keyword_policy(page, server_url)
    policy = PausePolicy.objects.get(name=POLICY_NAME)
    assert policy.kind == "keyword" and policy.domain == plain_domain
    assert policy.params["keywords"] == KEYWORDS

    try_on_sample(page, "Chest pain since noon; the ECG is normal.")
    assert page.locator("#trial-text mark").first.inner_text() == "the"
    assert page.locator("#trial-text .pause-marker").count() == 1
    reason = page.locator("#trial-pauses .trial-reason").first.inner_text()
    assert reason == 'Keyword "the" appeared'
    assert "{" not in page.locator("#content-main").inner_text()  # no raw JSON

    session_id = api_post(page, server_url, "/api/sessions", SESSION)["id"]

    def paused() -> bool:
        status = ReviewSession.objects.get(pk=session_id).status
        assert status in ("running", "paused"), f"session ended as {status} without pausing"
        return status == "paused"

    wait_for(paused, timeout=120, what="the policy pause")
    session = ReviewSession.objects.get(pk=session_id)
    pause = session.pauses.get()
    assert pause.trigger == POLICY_NAME and pause.kind == "keyword"
    word = pause.evidence["keyword"]
    assert word in KEYWORDS
    assert word.lower() in session.text.lower()
    api_post(page, server_url, f"/api/sessions/{session_id}/cancel", {})


PHONE = {"width": 390, "height": 844}
LOOKS = [("en-US", VIEWPORT, "en"), ("zh-CN", VIEWPORT, "zh-hans"), ("en-US", PHONE, "en-phone"),
         ("zh-CN", PHONE, "zh-hans-phone")]  # fmt: skip


def try_page_looks(browser, base: str, policy: PausePolicy, name: str) -> dict[str, str]:
    """The policy's try page in each language and width: its calibration's text, by look;
    each saved as a screenshot."""
    texts = {}
    for locale, viewport, look in LOOKS:
        context = browser.new_context(viewport=viewport, locale=locale)
        page = context.new_page()
        log_in_to_admin(page, base, f"/admin/reviewer/pausepolicy/{policy.pk}/try/")
        texts[look] = page.locator("#content-main").inner_text()
        screenshot(page, f"{name}-{look}", full_page=True)
        box = page.locator("#trial_form textarea").bounding_box()
        assert box is not None and box["x"] + box["width"] <= viewport["width"], (look, box)
        context.close()
    return texts


def test_the_admin_sees_over_which_sessions_drift_is_replayed(
    browser, server_url, admin_user, alice, plain_domain
):
    stored_session(alice, plain_domain, similarity=0.1)
    stored_session(alice, plain_domain, similarity=0.1)
    stored_session(alice, plain_domain)  # from before similarity was stored
    policy = PausePolicy.objects.create(domain=plain_domain, **drift())
    texts = try_page_looks(browser, server_url, policy, "admin-drift-replayed")
    assert "Kind: Drift. Domain" in texts["en"]  # a pausing drift policy is not "roll back"
    assert "类型：漂移。" in texts["zh-hans"]  # the name the rest of the page uses
    assert "replayed over the 2 of 3 recent sessions that stored it" in texts["en"]
    assert "One session stored none" in texts["en-phone"]
    assert "在 3 个近期会话中，只在保存了它的 2 个会话上回放" in texts["zh-hans"]

    older = Domain.objects.create(name="Older", slug="older", specialty="medical")
    stored_session(alice, older)
    none_stored = PausePolicy.objects.create(domain=older, **drift())
    texts = try_page_looks(browser, server_url, none_stored, "admin-drift-not-replayed")
    assert "Not replayed: Wander." in texts["en"] and "Sessions replayed" not in texts["en"]
    assert "未回放：Wander。" in texts["zh-hans-phone"]
