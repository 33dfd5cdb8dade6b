"""The Pause ROI dashboard and the site's own error pages in a real browser. Screenshots land
in artifacts/screenshots/dashboard-*.png and error-*.png."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.roi_factory import build_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TICKS = """(id) => [...document.querySelectorAll(`#${id} .xtick text`)].map((t) => t.textContent)"""


def test_two_days_of_data_read_as_two_days(page, server_url, admin_user, alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    log_in(page, server_url, "root", "root-password-1")
    page.goto(f"{server_url}/dashboard/?start=2025-03-01&end=2025-03-31&domain=plain")
    for chart in ("chart-pauses", "chart-latency", "chart-rates", "chart-roi"):
        page.wait_for_selector(f"#{chart} .main-svg")
        assert page.evaluate(TICKS, chart) == ["Mar 3", "Mar 4"], chart
    # Two periods: bars, not two lone dots.
    assert page.locator("#chart-latency .bars .point").count() >= 2
    assert page.locator("#chart-rates .bars .point").count() >= 2
    # No annual system cost: no ROI axis to clip, and the page says what is missing.
    assert page.locator("#chart-roi .y2tick").count() == 0
    missing = page.locator("#roi-missing").inner_text()
    assert "No annual system cost is set for Plain" in missing
    screenshot(page, "dashboard-two-days", full_page=True)


def test_a_reviewer_gets_the_sites_own_403_and_404(page, server_url, alice):
    log_in(page, server_url, "alice", "alice-password-1")
    denied = page.goto(f"{server_url}/dashboard/")
    assert denied.status == 403
    assert page.locator("h1").inner_text() == "Access denied"
    assert page.locator("header.topbar").is_visible() and page.locator("text=Log out").is_visible()
    background = page.evaluate(
        "() => getComputedStyle(document.querySelector('.card')).backgroundColor"
    )
    assert background == "rgb(255, 255, 255)"  # the site's stylesheet is applied
    screenshot(page, "error-403-en")
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    assert page.locator("h1").inner_text() == "拒绝访问"
    screenshot(page, "error-403-zh-hans")

    missing = page.goto(f"{server_url}/no/such/page/")
    assert missing.status == 404
    assert page.locator("h1").inner_text() == "找不到页面"
    screenshot(page, "error-404-zh-hans")
    page.click('button.lang[value="en"]')
    page.wait_for_selector('html[lang="en"]')
    assert page.locator("h1").inner_text() == "Page not found"

    icon = page.goto(f"{server_url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
    assert re.match(r"image/", icon.headers["content-type"])


def test_on_a_phone_a_wide_table_shows_that_it_scrolls(
    page, server_url, admin_user, alice, bob, plain_domain
):
    """The figures are wider than a phone: the table scrolls sideways inside its card, and a
    shade at its right edge (then at both, then at the left) says which way there is more."""
    build_history(alice, bob, plain_domain)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, server_url, "root", "root-password-1")
    page.goto(f"{server_url}/dashboard/?start=2025-03-01&end=2025-03-31&domain=plain")
    page.wait_for_selector("#chart-roi .main-svg")
    sizes = page.evaluate(
        "() => [...document.querySelectorAll('.table-scroll')].map((r) => [r.scrollWidth, r.clientWidth])"
    )
    print(sizes)
    wide = [i for i, (inner, shown) in enumerate(sizes) if inner > shown]
    assert wide, sizes  # one at least scrolls
    region = page.locator(".table-scroll").nth(wide[0])
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # the page does not
    shade = region.evaluate("(r) => getComputedStyle(r).backgroundAttachment")
    assert shade.split(", ") == ["local", "local", "scroll", "scroll"], shade
    region.scroll_into_view_if_needed()
    screenshot(page, "dashboard-phone-en")
