"""Every page works under the Content-Security-Policy: a real chromium records each violation
(the `securitypolicyviolation` event and the console) while a reviewer and an admin go through
the session page with its Plotly heatmaps, the dashboard, the admin's policy form and its
Try page, and a login lockout."""

from __future__ import annotations

import re

import pytest

from reviewer.models import Glossary, PausePolicy, ReviewSession
from tests.browser.conftest import log_in, show_live_heatmap
from tests.browser.test_review_ui import start_in_browser, wait_until_paused, ward_domain
from tests.session_factory import make_session

pytestmark = [
    pytest.mark.browser,
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def watched(page):
    """The page, with every CSP violation and script error it meets collected."""
    problems: list[str] = []
    page.add_init_script(RECORD_VIOLATIONS)
    page.on(
        "console",
        lambda m: (
            problems.append(m.text)
            if m.type == "error" and "Content Security Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.problems = problems
    return page


def assert_clean(page) -> None:
    violations = page.evaluate("() => window.__violations")
    assert not violations and not page.problems, (page.url, violations, page.problems)


def assert_policed(response) -> None:
    """The page came with the policy: a page without one would have nothing to violate."""
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy, policy


def visit(page, url: str, ready: str | None = None) -> None:
    assert_policed(page.goto(url))
    if ready:
        page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    assert_clean(page)


@pytest.mark.model
def test_the_session_page_draws_its_plotly_heatmaps_under_the_policy(
    watched, server_url, celery_worker_process, alice
):
    policy = {"name": "Blood pressure", "kind": "keyword", "params": {"keywords": ["blood"]}}
    domain = ward_domain("Ward note CSP", (policy,))
    log_in(watched, server_url, "alice", "alice-password-1")
    assert_clean(watched)
    with watched.expect_response(re.compile(r"/sessions/\d+/$")) as session_page:
        start_in_browser(watched, server_url, domain, max_new_tokens=30)
    assert_policed(session_page.value)
    wait_until_paused(watched)
    watched.click("#attention-expert summary")
    watched.wait_for_selector("#pause-heatmap .main-svg")
    show_live_heatmap(watched)
    assert watched.locator('#connection[data-state="connected"]').count() == 1
    assert_clean(watched)
    visit(watched, server_url + "/", "table.sessions")
    watched.select_option("#status-filter", "paused")  # submits from a static script
    watched.wait_for_url(re.compile(r"\?status=paused"))
    assert_clean(watched)
    visit(watched, server_url + "/sessions/new", "#id_input_text")


def test_the_dashboard_and_the_admin_pages_work_under_the_policy(
    watched, server_url, admin_user, plain_domain
):
    make_session(admin_user, status=ReviewSession.PAUSED)
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Watch", kind="keyword", params={"keywords": ["fever"]}
    )
    glossary = Glossary.objects.get(domain=plain_domain)
    log_in(watched, server_url, "root", "root-password-1")
    visit(watched, server_url + "/dashboard/", "#chart-pauses .main-svg")
    visit(watched, server_url + "/admin/", "#content")
    visit(watched, server_url + "/admin/reviewer/pausepolicy/add/", "a[data-kind=keyword]")
    watched.click("a[data-kind=keyword]")
    watched.wait_for_selector("#id_param_keywords")
    assert_clean(watched)
    visit(watched, server_url + f"/admin/reviewer/pausepolicy/{policy.pk}/change/", "a.trylink")
    watched.click("a.trylink")
    watched.fill("#id_text", "The patient has a fever since Monday.")
    watched.click("input[name=_try]")
    watched.wait_for_selector("#trial-text .pause-marker")
    assert_clean(watched)
    visit(watched, server_url + f"/admin/reviewer/glossary/{glossary.pk}/change/", "#content")
    visit(watched, server_url + f"/admin/reviewer/glossary/{glossary.pk}/import/", "#content")
    visit(watched, server_url + "/admin/reviewer/reviewsession/", "#changelist")
    visit(watched, server_url + "/no/such/page", "h1")


def test_a_locked_out_login_shows_the_app_page_saying_so(watched, server_url, bob):
    assert_policed(watched.goto(server_url + "/login/"))
    for _ in range(5):
        watched.fill("#id_username", "bob")
        watched.fill("#id_password", "not-his-password")
        watched.click("#log-in")
        watched.wait_for_load_state()
    watched.fill("#id_username", "bob")
    watched.fill("#id_password", "bob-password-1")
    watched.click("#log-in")
    watched.wait_for_selector("#locked-out")
    assert "locked for 15 minutes" in watched.locator("#locked-out").inner_text()
    assert watched.url.endswith("/login/")
    assert_clean(watched)
