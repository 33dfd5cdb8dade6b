"""The audit graph page in a real browser: each graph drawn left to right from the signals to
the decision, with why it paused there, in English and Chinese, at a desk's and a phone's width."""

from __future__ import annotations

import pytest

from reviewer import events, lifecycle
from reviewer.lifecycle import reports
from reviewer.models import ReviewSession
from reviewer.worker import dispatch
from tests.browser.conftest import VIEWPORT, log_in, screenshot
from tests.browser.stored_sessions import paused_session
from tests.session_factory import stub_worker
from tests.test_audit_graph import policy_pause, token

pytestmark = [
    pytest.mark.browser,
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

PHONE = {"width": 390, "height": 844}
LOOKS = [
    ("audit-graph-en", VIEWPORT, "en-US"),
    ("audit-graph-zh-hans", VIEWPORT, "zh-CN"),
    ("audit-graph-en-phone", PHONE, "en-US"),
    ("audit-graph-zh-hans-phone", PHONE, "zh-CN"),
]
BUDGET = {"rule": "budget", "detail": "over the pause budget, 3 tokens after the last pause; the budget asks for 20"}  # fmt: skip


def story(alice, monkeypatch) -> ReviewSession:
    """A session paused by "Unsure" and resumed; then its worker was lost, the budget held a
    pause back, "Unsure" paused again with its heads looking apart, and alice muted it and
    approved the text."""
    stub_worker(monkeypatch)
    monkeypatch.setattr(dispatch, "segment", lambda *args: None)
    session = paused_session(alice)
    ReviewSession.objects.filter(pk=session.pk).update(
        status=ReviewSession.RUNNING, worker="worker-1", policy_specs=[
            {"name": "Unsure", "kind": "low_confidence", "params": {"threshold": 0.35}}
        ],
    )  # fmt: skip
    for position in range(9, 30):
        token(session, position, 4.5 if position == 27 else 1.0)
    lifecycle.redispatch(session.pk, "worker-1")
    session = ReviewSession.objects.get(pk=session.pk)
    flag = {
        "position": 24, "policy": "Unsure", "kind": "low_confidence", "action": "flag",
        "reason": "Top-1 probability 0.12 is below 0.35 (not paused: over the pause budget)",
        "evidence": {"top1_prob": 0.12, "threshold": 0.35, "budget": BUDGET},
        "span": None, "rollback_to": None,
    }  # fmt: skip
    reports.record_flag(session, flag)
    pause = policy_pause(session, position=30)
    scattered = [[0.94, 0.02, 0.02, 0.02], [0.02, 0.94, 0.02, 0.02], [0.02, 0.02, 0.02, 0.94]]
    detail = {"pause_id": pause.pk, "edit": None, "position": 30,
              "attention": {"layers": [], "heads": scattered}}  # fmt: skip
    reports.record_pause_detail(session.pk, events.PAUSE_ATTENTION, detail)
    lifecycle.mute(alice, session.pk, "Unsure")
    lifecycle.approve(alice, session.pk, comment="Checked the troponin line.")
    return session


def test_it_draws_why_it_paused_from_the_signals_to_the_decision(
    browser, server_url, alice, monkeypatch, compiled_catalogs
):
    session = story(alice, monkeypatch)
    texts = {}
    for name, viewport, locale in LOOKS:
        context = browser.new_context(viewport=viewport, locale=locale)
        page = context.new_page()
        log_in(page, server_url, "alice", "alice-password-1")
        page.goto(f"{server_url}/sessions/{session.pk}/")
        page.click("#audit-graphs-link")
        page.wait_for_selector(".audit-graph svg.graph")
        texts[name] = [p.inner_text() for p in page.locator(".audit-graph .why").all()]
        last = page.locator(".audit-graph").last
        assert_left_to_right(last)
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= viewport["width"], f"{name}: the page is {width} px wide"
        screenshot(page, name, full_page=True)
        context.close()

    en, zh = texts["audit-graph-en"], texts["audit-graph-zh-hans"]
    assert len(en) == 2  # the budget's flag, the pause (the stored first pause has none)
    assert en[0].startswith("It did not pause here: Unsure fired (Top-1 probability 12%")
    assert "the worker worker-1 was lost" in en[0]
    assert en[1].startswith("It paused here because Unsure fired: Top-1 probability 8%")
    assert "entropy of 4.50 nats (above the session's usual range, up to" in en[1]
    assert zh[0].startswith("此处没有暂停：“不确定”已触发")
    assert zh[1].startswith("在此暂停，因为“不确定”触发：最高概率 8% 低于 35%")
    assert texts["audit-graph-en-phone"] == en and texts["audit-graph-zh-hans-phone"] == zh


def assert_left_to_right(card) -> None:
    """Readings left of the policy, the policy left of the pause, the pause left of the
    actions, the actions left of the decision."""
    lefts = {}
    for kind in ("reading", "policy", "subject", "action", "decision"):
        boxes = card.locator(f"g.node-{kind} rect")
        assert boxes.count() >= 1, kind
        lefts[kind] = float(boxes.first.get_attribute("x"))
    order = [lefts[k] for k in ("reading", "policy", "subject", "action", "decision")]
    assert order == sorted(order) and len(set(order)) == 5, lefts
    titles = [t.text_content() or "" for t in card.locator("g.node-action title").all()]
    assert any("alice" in t for t in titles), titles
