"""The admin pages the dashboard and the docs send an admin to: a domain's ROI settings and its
task decoding presets (they were defined but not registered, so the links led nowhere)."""

from __future__ import annotations

import pytest
from django.test import Client

from reviewer.analytics import roi
from reviewer.models import RoiSettings, TaskDecoding

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client: Client, admin_user) -> Client:
    client.force_login(admin_user)
    return client


def test_it_lists_roi_settings_and_decoding_presets_on_the_admin_index(staff):
    page = staff.get("/admin/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'href="/admin/reviewer/roisettings/"' in page
    assert 'href="/admin/reviewer/taskdecoding/"' in page


def test_it_saves_a_domains_roi_settings_that_the_figures_then_use(staff, plain_domain):
    assert roi.settings_for([plain_domain])["Plain"]["set_by_admin"] is False
    answer = staff.post(
        "/admin/reviewer/roisettings/add/",
        {
            "domain": plain_domain.pk,
            "baseline_regenerate_cycles": "2.5",
            "minutes_saved_per_cycle": "12",
            "reviewer_hourly_cost": "150.00",
            "loss_avoided_per_interception": "900.00",
            "annual_system_cost": "20000.00",
            "currency": "EUR",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:500]
    stored = RoiSettings.objects.get(domain=plain_domain)
    assert (stored.baseline_regenerate_cycles, stored.currency) == (2.5, "EUR")
    assert roi.settings_for([plain_domain])["Plain"]["set_by_admin"] is True
    listed = staff.get("/admin/reviewer/roisettings/").content.decode()
    assert "EUR" in listed and "Plain" in listed


def test_it_refuses_negative_figures_and_a_currency_that_is_no_code(staff, plain_domain):
    form = {
        "domain": plain_domain.pk,
        "baseline_regenerate_cycles": "-2",
        "minutes_saved_per_cycle": "-10",
        "reviewer_hourly_cost": "-100.00",
        "loss_avoided_per_interception": "0",
        "annual_system_cost": "-1.00",
        "currency": "x$",
    }
    answer = staff.post("/admin/reviewer/roisettings/add/", form, HTTP_ACCEPT_LANGUAGE="en")
    page = answer.content.decode()
    assert answer.status_code == 200 and page.count("Must be 0 or more") == 4
    assert "A three-letter currency code" in page
    assert not RoiSettings.objects.exists()


def test_it_refuses_a_decoding_preset_the_sampler_would_refuse(staff, plain_domain):
    add = "/admin/reviewer/taskdecoding/add/"
    bad = {"domain": plain_domain.pk, "task_type": "open", "params": '{"temperature": -1}'}
    answer = staff.post(add, bad)
    assert answer.status_code == 200  # the form again, with the reason
    assert "errornote" in answer.content.decode()
    assert not TaskDecoding.objects.exists()

    good = {**bad, "params": '{"temperature": 0.3}'}
    assert staff.post(add, good).status_code == 302
    assert TaskDecoding.objects.get(domain=plain_domain).params == {"temperature": 0.3}
