"""Gated attention at a pause, in a real browser, from a stored pause whose attention carries the
engine's gate: the words the model was not looking at are struck through, each word it looked
at says why (a styled line and its title), a summary line counts positions and attention mass,
and a legend explains it; in English and in Chinese, and on a phone. The case text's anchor
markup never shows. Screenshots land in artifacts/screenshots/gate-*.png."""

from __future__ import annotations

import pytest

from reviewer.models import PauseEvent, SessionEvent
from tests.browser.conftest import VIEWPORT, log_in, screenshot
from tests.browser.stored_sessions import CASE, WORDS, paused_session, prompt
from tests.browser.test_review_desk import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PASSWORD = "alice-password-1"
PHONE = {"width": 390, "height": 844}
MARKED = CASE.replace("chest pain", "<ANCHOR:symptoms>chest pain</ANCHOR>")
WINDOW = 3  # the last generated positions

READ = """() => {
  const read = (selector) => [...document.querySelectorAll(selector)].map((e) => ({
    text: e.textContent.trim(), gate: e.dataset.gate || null, title: e.title || "",
    anchor: e.dataset.anchor || null, struck: getComputedStyle(e).backgroundImage,
    line: getComputedStyle(e).borderTopStyle,
  }));
  return { case: read("#case-text .cw"), generated: read("#tokens .word:not(.blank)") };
}"""


def gate_of(texts: list[str]) -> dict:
    """Sinks first, the anchor over "chest pain", "man" a heavy hitter, the recent window at the
    end; nothing else looked at."""
    reasons: list[str | None] = [None] * len(texts)
    for p in range(4):
        reasons[p] = "sink"
    anchor = [p for p, t in enumerate(texts[: len(prompt()[0])]) if t.strip() in ("chest", "pain")]
    for p in anchor:
        reasons[p] = "anchor"
    reasons[next(p for p, t in enumerate(texts) if t.strip() == "man")] = "heavy"
    for p in range(len(texts) - WINDOW, len(texts)):
        reasons[p] = "window"
    kept = sum(r is not None for r in reasons)
    return {
        "mode": "gated",
        "reasons": reasons,
        "anchors": [{"name": "symptoms", "start": anchor[0], "end": anchor[-1] + 1}],
        "hit_rate": 0.934,
        "kept": kept,
        "total": len(reasons),
    }


def gated_session(alice):
    session = paused_session(alice)
    session.input_text = MARKED
    session.save(update_fields=["input_text"])
    row = SessionEvent.objects.get(session=session, type="pause_attention")
    row.payload["attention"]["gate"] = gate_of(row.payload["attention"]["tokens"])
    row.save(update_fields=["payload"])
    PauseEvent.objects.filter(session=session).update(attention=row.payload["attention"])
    return session, row.payload["attention"]["gate"]


def open_gated(page, server_url, session) -> dict:
    log_in(page, server_url, "alice", PASSWORD)
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.wait_for_selector("#attention-gate:not([hidden]) #attention-gate-legend li")
    page.wait_for_selector("#tokens .word[data-gate]")
    return page.evaluate(READ)


def test_it_shows_what_the_model_was_not_looking_at_and_why(page, server_url, alice):
    session, gate = gated_session(alice)
    seen = open_gated(page, server_url, session)
    assert "ANCHOR" not in page.content() and page.locator("#case-text").inner_text() == CASE

    summary = page.locator("#attention-gate-summary").inner_text()
    assert (
        summary
        == f"Looking at {gate['kept']} of {gate['total']} positions; 93% of the attention mass."
    )
    legend = page.locator("#attention-gate-legend li").all_inner_texts()
    assert [item.split(":")[0].removeprefix("abc").strip() for item in legend] == [
        "sink", "recent window", "anchor", "heavy hitter", "struck through",
    ]  # fmt: skip

    case = {w["text"]: w for w in seen["case"]}
    for word in ("chest", "pain"):
        assert case[word]["gate"] == "anchor" and case[word]["anchor"] == "symptoms"
        assert "Looked at: anchor “symptoms”" in case[word]["title"]
        assert case[word]["line"] == "solid"  # a style of its own, not only a colour
    assert case["man"]["gate"] == "heavy" and case["man"]["line"] == "dashed"
    assert case["with"]["gate"] == "off" and "gradient" in case["with"]["struck"]
    assert case["with"]["title"].endswith("Not looked at in this step")

    generated = seen["generated"]
    assert [w["gate"] for w in generated[-WINDOW:]] == ["window"] * WINDOW
    assert all(w["gate"] == "off" for w in generated[:-WINDOW])
    assert generated[-1]["line"] == "dotted" and "recent window" in generated[-1]["title"]
    page.mouse.move(0, 0)
    screenshot(page, "gate-paused-en", full_page=True)
    assert axe_violations(page) == []  # the struck grey words keep their contrast

    # Unticking "Show where the model looked" takes the marks away, and ticking brings them back.
    page.uncheck("#attention-show")
    assert page.locator("[data-gate]").count() == 0
    assert page.locator("#case-text .cw", has_text="with").get_attribute("title") is None
    page.check("#attention-show")
    page.wait_for_selector("#tokens .word[data-gate]")


def test_it_explains_the_gate_in_chinese_and_on_a_phone(browser, server_url, alice):
    session, gate = gated_session(alice)
    for name, options in {
        "gate-paused-zh-hans": {"viewport": VIEWPORT, "locale": "zh-CN"},
        "gate-paused-en-phone": {
            "viewport": PHONE,
            "locale": "en-US",
            "has_touch": True,
            "is_mobile": True,
        },
    }.items():
        context = browser.new_context(**options)
        page = context.new_page()
        seen = open_gated(page, server_url, session)
        summary = page.locator("#attention-gate-summary").inner_text()
        if options["locale"] == "zh-CN":
            assert f"正在看 {gate['total']} 个位置中的 {gate['kept']} 个" in summary
            assert "注意力总量的 93%" in summary
            assert "锚点" in page.locator("#attention-gate-legend").inner_text()
            assert "看了：锚点 “symptoms”" in {w["text"]: w for w in seen["case"]}["chest"]["title"]
        else:
            assert summary.startswith("Looking at")
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= options["viewport"]["width"]
        page.locator("#attention-gate").scroll_into_view_if_needed()
        screenshot(page, name)
        context.close()
    assert len(WORDS) > WINDOW
