"""Attention a reviewer can read, in a real browser over the real model in a real worker: at a
pause, bars under the words of the case text and of the generated text; a clicked word's own
attention; the heatmaps by word; all of it still there after an edit, a rollback and a reload.
Screenshots land in artifacts/screenshots/attention-*.png."""

from __future__ import annotations

import re

import pytest

from reviewer.models import GlossaryTerm, ReviewSession, SessionEvent
from reviewer.web.tokenizer import case_map
from tests.browser.conftest import VIEWPORT, log_in, screenshot, show_live_heatmap
from tests.browser.test_review_ui import (
    CASE,
    SELECT_TEXT,
    start_in_browser,
    wait_for_text,
    wait_until_paused,
    ward_domain,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
]

PHONE = {"width": 390, "height": 844}

# What the bars show: each highlighted word's share, by kind (case text or generated text).
SHARES = """() => {
  const read = (selector) => [...document.querySelectorAll(selector)].map((e) => ({
    text: e.textContent, share: +e.dataset.attention, title: e.title || "", word: e.dataset.word ?? e.dataset.first,
  }));
  return { case: read("#case-text .cw.att"), generated: read("#tokens .word.att") };
}"""


def expected_case_fraction(session: ReviewSession) -> float:
    """Of the attention at the pause (mean over layers) on the case text's words and on the
    generated text, the part on the case text, from the stored pause and the server's map."""
    attention = latest_attention(session)
    layers = attention["layers"]
    row = [sum(column) / len(layers) for column in zip(*layers, strict=True)]
    spans = case_map(session.prompt_ids, session.domain.system_prompt, session.input_text)
    case = sum(
        row[p]
        for p, span in enumerate(spans["caseSpans"])
        if span and session.input_text[span[0] : span[1]].strip()
    )
    generated = sum(row[attention["prompt_length"] :])
    return case / (case + generated)


def latest_attention(session: ReviewSession) -> dict:
    """The attention at the pause as it stands: read after the pause, or after the latest edit."""
    event = SessionEvent.objects.filter(session=session, type="pause_attention").latest("seq")
    return event.payload["attention"]


def assert_pause_bars(page, session: ReviewSession) -> None:
    page.wait_for_selector("#attention-legend:not([hidden]) .top-case q")
    shares = page.evaluate(SHARES)
    assert len(shares["case"]) >= 3 and shares["generated"]
    # One bar per generated word, however many pieces the model wrote it in.
    words = {w["word"]: w["share"] for w in shares["generated"]}
    assert len(words) == len(shares["generated"])
    values = [w["share"] for w in shares["case"]] + list(words.values())
    assert all(0 < v <= 1 for v in values) and sum(values) <= 1.001
    case_words = {w["text"] for w in shares["case"]}
    assert case_words <= set(CASE.replace(".", " ").replace("-", " ").split()) | {".", "-"}
    assert all("%" in w["title"] for w in shares["case"])  # the share, not only a colour
    # The page's split between the case and the text is the stored attention's.
    every = page.evaluate("() => CaesuraAttention.shares()")  # drawn or too small to draw
    case_part = sum(share for key, share in every.items() if key.startswith("c"))
    assert case_part / sum(every.values()) == pytest.approx(
        expected_case_fraction(session), abs=1e-3
    )
    assert "%" in page.locator("#attention-rest").inner_text()


def open_expert_view(page) -> None:
    if not page.locator("#attention-expert").evaluate("(d) => d.open"):
        page.click("#attention-expert summary")
    page.wait_for_selector("#pause-heatmap .main-svg")


def assert_kind_names_beside_the_cells(page) -> None:
    """The names of the kinds of words (case text, generated text) sit in the margin right of
    the heatmaps, never over a cell, and inside the figure."""
    boxes = page.evaluate(
        """() => {
          const plot = document.getElementById('pause-heatmap');
          const box = (el) => el.getBoundingClientRect().toJSON();
          return {
            figure: box(plot),
            cells: [...plot.querySelectorAll('.heatmaplayer image')].map(box),
            names: [...plot.querySelectorAll('.annotation-text-g')].map(box),
          };
        }"""
    )
    assert boxes["cells"] and len(boxes["names"]) >= 2  # case text, generated text
    right = max(cell["right"] for cell in boxes["cells"])
    for name in boxes["names"]:
        assert right <= name["left"] and name["right"] <= boxes["figure"]["right"], (name, right)


def heatmap_rows(page, plot: str) -> list[str]:
    return page.evaluate(f"() => document.getElementById('{plot}').layout.yaxis.ticktext")


def test_it_shows_where_the_model_looked_in_the_words_before_and_after_an_edit(
    page, browser, server_url, celery_worker_process, alice
):
    domain = ward_domain("Ward note attention")
    term = GlossaryTerm.objects.get(glossary__domain=domain, term="high blood pressure")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, server_url, "alice", "alice-password-1")
    sid = start_in_browser(page, server_url, domain, max_new_tokens=40)
    wait_for_text(page, "high blood pressure")
    page.keyboard.press("Space")
    wait_until_paused(page)
    session = ReviewSession.objects.get(pk=sid)
    page.wait_for_selector("#attention-legend:not([hidden]) .top-case q")  # read after the pause
    assert page.locator("#attention-what").inner_text().startswith("Where the model looked")
    assert_pause_bars(page, session)

    # The expert view: a row per word, the template folded away until asked for.
    open_expert_view(page)
    rows = heatmap_rows(page, "pause-heatmap")
    assert "chest" in rows and "pain" in rows and "a control token" not in rows
    top = page.evaluate("() => document.getElementById('pause-heatmap').layout.coloraxis.cmax")
    sink = max(layer[0] for layer in latest_attention(session)["layers"])
    assert top < sink  # the first position does not set the colour scale
    page.check("#attention-template")
    page.wait_for_function(
        "(n) => document.getElementById('pause-heatmap').layout.yaxis.ticktext.length > n",
        arg=len(rows),
    )
    assert heatmap_rows(page, "pause-heatmap")[0] == "a control token"  # <|im_start|>
    page.uncheck("#attention-template")
    assert_kind_names_beside_the_cells(page)
    page.mouse.move(0, 0)
    screenshot(page, "attention-paused-en", full_page=True)

    # A clicked generated word shows where it looked, from the rows streamed live.
    word = page.locator("#tokens .word:not(.blank)").nth(5)
    word.click()
    page.wait_for_selector("#tokens .word.att-focus")
    assert page.locator("#attention-what q").inner_text().strip()
    assert page.locator("#case-text .cw.att").count() >= 3
    page.click("#attention-back")
    page.wait_for_function("() => CaesuraAttention.focused() === null")
    # From the keyboard: `w` on the focused word, and again to go back.
    page.locator("#tokens .word:not(.blank)").nth(3).focus()
    page.keyboard.press("w")
    page.wait_for_selector("#tokens .word.att-focus")
    page.keyboard.press("w")
    page.wait_for_function("() => CaesuraAttention.focused() === null")

    # A glossary replacement: the bars, the expert view and the live rows all stay.
    assert page.evaluate(SELECT_TEXT, "high blood pressure")
    page.click(f'#glossary-terms button[data-term="{term.pk}"]')
    wait_for_text(page, term.preferred)
    page.wait_for_function(
        "() => caesura.state.pause && caesura.state.pause.edited && !caesura.state.pause.attentionStale"
    )
    edited = ReviewSession.objects.get(pk=sid)
    assert_pause_bars(page, edited)
    assert page.locator("#pause-attention-card").is_visible()
    open_expert_view(page)
    assert heatmap_rows(page, "pause-heatmap")
    # The words the edit wrote have no live row: the note says so, the rest keep theirs.
    show_live_heatmap(page, until="#live-note:not([hidden])")
    assert heatmap_rows(page, "live-heatmap"), "the live heatmap has rows"
    page.locator("#tokens .word.edited").first.click()
    assert "No attention is recorded for" in page.locator("#attention-what").inner_text()
    page.click("#attention-back")
    page.mouse.move(0, 0)
    screenshot(page, "attention-edited-en", full_page=True)

    # A rollback, then the page drawn afresh from the stored events: still there.
    cut = page.locator("#tokens .word:not(.blank)").nth(8)
    keep = int(cut.get_attribute("data-first"))
    cut.click(button="right")
    page.click("#rollback-here")
    page.wait_for_function("(n) => caesura.state.tokens.length === n", arg=keep)
    page.wait_for_function("() => caesura.state.pause && !caesura.state.pause.attentionStale")
    assert_pause_bars(page, ReviewSession.objects.get(pk=sid))
    page.reload()
    wait_until_paused(page)
    assert_pause_bars(page, ReviewSession.objects.get(pk=sid))
    assert errors == []

    for name, viewport, locale in (
        ("attention-paused-zh-hans", VIEWPORT, "zh-CN"),
        ("attention-paused-en-phone", PHONE, "en-US"),
    ):
        context = browser.new_context(viewport=viewport, locale=locale)
        other = context.new_page()
        log_in(other, server_url, "alice", "alice-password-1")
        other.goto(f"{server_url}/sessions/{sid}/")
        wait_until_paused(other)
        other.wait_for_selector("#attention-legend:not([hidden]) .top-case q")
        other.locator("#tokens .word:not(.blank)").nth(4).click()
        other.wait_for_selector("#tokens .word.att-focus")
        open_expert_view(other)
        if locale == "zh-CN":
            assert re.fullmatch(
                r"第 \d+ 层的各注意力头", other.locator("#heads-title").inner_text()
            )
        width = other.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= viewport["width"], f"the page is {width} px wide"
        assert_kind_names_beside_the_cells(other)
        other.mouse.move(0, 0)
        screenshot(other, name, full_page=True)
        context.close()
