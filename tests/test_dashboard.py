"""The Pause ROI dashboard: staff only, real figures, "no data" for empty periods, CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from tests.roi_factory import build_history, set_roi_settings

pytestmark = pytest.mark.django_db

MARCH = {"start": "2025-03-01", "end": "2025-03-31"}


def test_it_sends_anonymous_users_to_the_login_page(client):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_refuses_reviewers_who_are_not_staff(client, alice):
    client.force_login(alice)
    assert client.get(reverse("dashboard")).status_code == 403
    assert client.get(reverse("dashboard-csv")).status_code == 403


def test_it_shows_the_figures_of_the_sessions_in_the_period(
    client, admin_user, alice, bob, plain_domain
):
    build_history(alice, bob, plain_domain)
    set_roi_settings(plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {**MARCH, "domain": "plain"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "No data for this period" not in page
    totals = response.context["totals"]
    assert totals["sessions"] == 3 and totals["pauses"] == 5
    assert totals["roi"] == pytest.approx(0.106)
    shown = response.context["shown"]
    assert shown["roi"] == "10.6%" and shown["interception_rate"] == "67%"
    assert "10.6%" in page and "10000.00 USD" in page  # the result and the admin's cost beside it
    assert [s["period"] for s in response.context["series"]] == ["2025-03-03", "2025-03-04"]
    assert 'id="roi-series"' in page and reverse("plotly-js") in page


def test_it_filters_by_reviewer(client, admin_user, alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {**MARCH, "reviewer": "bob"})
    assert response.context["totals"]["sessions"] == 1
    assert response.context["totals"]["pauses"] == 0


def test_it_says_no_data_for_an_empty_period(client, admin_user, alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {"start": "2024-01-01", "end": "2024-01-31"})
    assert response.status_code == 200
    assert "No data for this period." in response.content.decode()
    assert response.context["totals"]["sessions"] == 0


def test_it_reports_bad_filters_instead_of_failing(client, admin_user):
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {"start": "yesterday", "bucket": "decade"})
    assert response.status_code == 200
    errors = " ".join(response.context["filters"].errors)
    assert "not a date" in errors and "Unknown grouping" in errors


def test_it_exports_one_csv_row_per_session(client, admin_user, alice, bob, plain_domain):
    sessions = build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard-csv"), {**MARCH, "reviewer": "alice"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [int(r["session"]) for r in rows] == [sessions["a"].pk, sessions["b"].pk]
    assert [int(r["pauses"]) for r in rows] == [2, 3]
    assert rows[0]["reviewed_with_pause_edit_continue"] == "True"


def test_it_serves_plotly_without_a_cdn(client, admin_user):
    client.force_login(admin_user)
    response = client.get(reverse("plotly-js"))
    assert response.status_code == 200
    assert b"plotly" in b"".join(response.streaming_content)[:2000].lower()


def test_it_explains_what_the_roi_is_missing(client, admin_user, alice, bob, plain_domain):
    build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {**MARCH, "domain": "plain"})
    missing = response.context["missing"]
    assert any("No annual system cost is set for Plain" in line for line in missing)
    assert any("still in use for Plain" in line for line in missing)
    assert 'id="roi-missing"' in response.content.decode()


def test_it_has_nothing_missing_once_an_admin_set_the_costs(
    client, admin_user, alice, bob, plain_domain
):
    build_history(alice, bob, plain_domain)
    set_roi_settings(plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {**MARCH, "domain": "plain"})
    assert not any("annual system cost" in line for line in response.context["missing"])
    assert not any("default assumptions" in line for line in response.context["missing"])


def test_it_refuses_a_reviewer_with_the_sites_own_403_page(client, alice):
    client.force_login(alice)
    response = client.get(reverse("dashboard"), HTTP_ACCEPT_LANGUAGE="en")
    page = response.content.decode()
    assert response.status_code == 403
    assert "caesura.css" in page and 'class="topbar"' in page and "Access denied" in page
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    chinese = client.get(reverse("dashboard")).content.decode()
    assert "拒绝访问" in chinese and "caesura.css" in chinese
