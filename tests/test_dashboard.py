"""The Pause ROI dashboard: staff only, real figures, "no data" for empty periods, CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from reviewer.models import ReviewSession
from tests.floor_factory import note_drafter
from tests.roi_factory import DAY_1, build_history, make_session, set_roi_settings

pytestmark = pytest.mark.django_db

MARCH = {"start": "2025-03-01", "end": "2025-03-31"}


def test_it_sends_anonymous_users_to_the_login_page(client):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_refuses_reviewers_who_are_not_staff(client, alice):
    client.force_login(alice)
    assert client.get(reverse("dashboard")).status_code == 403
    assert client.get(reverse("dashboard-csv")).status_code == 403
    assert f'href="{reverse("dashboard")}"' not in client.get("/").content.decode()


def test_staff_reach_it_from_every_pages_head(client, admin_user):
    client.force_login(admin_user)
    for path in ("/", reverse("session-new")):
        assert f'href="{reverse("dashboard")}">Dashboard</a>' in client.get(path).content.decode()


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


def test_it_offers_every_reviewer_the_filter_finds(client, admin_user, alice, bob, plain_domain):
    """Bob owns no session, but claimed one an application started: the filter finds it, so
    the drop-down names him. Staff claiming Alice's own session is not its reviewer."""
    started = make_session(None, plain_domain, DAY_1, tokens=10)
    ReviewSession.objects.filter(pk=started.pk).update(application=note_drafter(), claimed_by=bob)
    owned = make_session(alice, plain_domain, DAY_1, tokens=10)
    ReviewSession.objects.filter(pk=owned.pk).update(claimed_by=admin_user)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), MARCH)
    assert [u.username for u in response.context["reviewers"]] == ["alice", "bob"]
    response = client.get(reverse("dashboard"), {**MARCH, "reviewer": "bob"})
    assert response.context["totals"]["sessions"] == 1


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


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"end": "0001-01-01"}, "is not a date from 1900"),  # its default start: before year 1
        ({"end": "9999-12-31"}, "is not a date from 1900"),  # the day after: after year 9999
        ({"start": "0001-01-01", "end": "9999-12-31"}, "is not a date from 1900"),
        ({"domain": "plain\x00"}, "Unknown domain"),  # the database holds no NUL
        ({"reviewer": "\x00"}, "Unknown reviewer"),
    ],
)
def test_it_reports_a_filter_out_of_range_as_any_bad_one(client, admin_user, query, words):
    client.force_login(admin_user)
    for name in ("dashboard", "dashboard-csv"):
        response = client.get(reverse(name), query)
        assert response.status_code == 200, name
    response = client.get(reverse("dashboard"), query)
    assert words in " ".join(response.context["filters"].errors)


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


def chinese_dashboard(client, admin_user, plain, params):
    """The dashboard on a Chinese page; Plain has a Chinese name and a policy "Dosage" (剂量)."""
    from reviewer.models import PausePolicy

    plain.name_zh = "普通病历"
    plain.save()
    PausePolicy.objects.get_or_create(domain=plain, name="Dosage", name_zh="剂量", kind="keyword")
    client.force_login(admin_user)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    return client.get(reverse("dashboard"), params)


def test_it_shows_the_dashboard_in_chinese(
    client, admin_user, alice, bob, plain_domain, compiled_catalogs
):
    build_history(alice, bob, plain_domain)
    response = chinese_dashboard(client, admin_user, plain_domain, {**MARCH, "domain": "plain"})
    page = response.content.decode()
    figures = page.split('id="roi-figures"')[1].split("</table>")[0]
    # The Figures table: labels, notes and units in Chinese, no English left.
    assert "每个会话的暂停次数" in figures and "Pauses per session" not in figures
    assert "从请求到停下" in figures and "request to halt" not in figures
    assert "决策链压缩" in figures and "no data" not in figures
    assert "无数据" in figures  # no annual system cost: no ROI
    assert " 秒" in figures and " s<" not in figures
    # Trigger names: the reviewer's own pauses and the policy by its Chinese name.
    triggers = figures.split('data-figure="pauses_by_trigger"')[1]
    assert "手动：2" in triggers and "剂量：2" in triggers and "manual" not in triggers
    # Group by: the options read in Chinese, their values stay what the URL takes.
    assert '<option value="week">周</option>' in page and ">week<" not in page
    assert 'data-week-of="%s 当周"' in page  # a template literal's "%" is doubled in its msgid
    # The formula, and the domain by its Chinese name in the settings and what is missing.
    assert "ROI =（节省的审阅工时" in page and "reviewer hours saved" not in page
    settings = page.split('id="roi-settings"')[1].split("</table>")[0]
    assert "<td>普通病历</td>" in settings and "<td>Plain</td>" not in settings
    assert any("普通病历" in line for line in response.context["missing"])
    # The charts: series and axes named in Chinese, each axis with its unit.
    names = response.context["chart_names"]
    assert names["triggers"]["manual"] == "手动" and names["triggers"]["Dosage"] == "剂量"
    assert names["valueAxis"] == "价值（USD）" and names["latencyAxis"] == "延迟（毫秒）"
    assert names["ratesAxis"] == "占暂停的比例（%）" and names["editsAxis"] == "每次暂停的编辑数"


def test_it_reports_bad_filters_in_chinese(client, admin_user, plain_domain, compiled_catalogs):
    response = chinese_dashboard(
        client,
        admin_user,
        plain_domain,
        {"start": "yesterday", "bucket": "fortnight", "domain": "nowhere", "reviewer": "nobody"},
    )
    errors = list(response.context["filters"].errors)
    assert any(e.startswith("开始日期“yesterday”不是 1900 至 9998 年间的日期") for e in errors), (
        errors
    )
    assert "未知的分组方式“fortnight”；按天分组。" in errors
    assert "未知的领域“nowhere”；显示全部领域。" in errors
    assert "未知的审阅人“nobody”；显示全部审阅人。" in errors
    assert not any("Unknown" in e or "not a date" in e for e in errors)
    backwards = chinese_dashboard(
        client, admin_user, plain_domain, {"start": "2025-03-31", "end": "2025-03-01"}
    )
    assert "所选期间的开始晚于结束；显示默认期间。" in backwards.content.decode()


def test_it_writes_the_durations_of_a_table_in_one_unit(
    client, admin_user, alice, bob, plain_domain
):
    build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    response = client.get(reverse("dashboard"), {**MARCH, "domain": "plain"})
    shown = response.context["shown"]
    # Manual latency 200 / 290 ms and a 10 s decision: all three in seconds, with the unit.
    assert shown["manual_latency_ms_p50"] == "0.2 s"
    assert shown["manual_latency_ms_p95"] == "0.29 s"
    assert shown["decision_seconds_p50"] == "10 s"
    assert shown["hours_saved"] == "0.2 h"  # default: 1 cycle × 10 min


def test_it_picks_one_unit_for_all_the_durations_of_a_table():
    from reviewer.analytics.dashboard import duration, duration_unit

    assert duration_unit([0.046, 0.4]) == "ms"
    assert duration_unit([0.046, 21.457, 6.5]) == "s"
    assert duration_unit([0, 11, 150]) == "min"
    assert duration_unit([]) == "s"
    assert [duration(t, "s") for t in (0.046, 21.457, 6.5)] == ["0.046 s", "21.5 s", "6.5 s"]
    assert [duration(t, "min") for t in (0, 150)] == ["0 min", "2.5 min"]
    assert duration(0.046, "ms") == "46 ms"


def test_it_keeps_wide_tables_in_a_scrolling_box(client, admin_user, alice, bob, plain_domain):
    """At phone width a table scrolls in its own box (caesura.css .table-scroll), not the page."""
    build_history(alice, bob, plain_domain)
    client.force_login(admin_user)
    page = client.get(reverse("dashboard"), {**MARCH, "domain": "plain"}).content.decode()
    before_each = page.split("<table")[:-1]
    assert len(before_each) >= 3  # the floor, the figures, the ROI settings
    for before in before_each:
        assert before.rsplit("<div", 1)[1].startswith(' class="table-scroll"')
    assert 'id="chart-edits"' in page and 'id="chart-rates"' in page  # a ratio apart from the %
