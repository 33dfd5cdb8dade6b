"""A reviewer in a real browser: the app under daphne, the real model in a real Celery
worker, Debian's chromium. Screenshots of the paused page land in artifacts/screenshots/."""

from __future__ import annotations

import pytest

from reviewer.demo.demo_data import DOMAINS
from reviewer.models import Domain, Glossary, GlossaryTerm, PausePolicy, ReviewSession
from tests.browser.conftest import log_in, screenshot, show_live_heatmap
from tests.conftest import wait_for
from tests.session_factory import make_session

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
]

CASE = "58-year-old man with chest pain and high blood pressure since this morning. Write the note."
SELECT_TEXT = """(needle) => {
  const box = document.getElementById("tokens");
  const spans = [...box.querySelectorAll(".tok")];
  const text = spans.map((s) => s.textContent).join("");
  const start = text.indexOf(needle);
  if (start < 0) return false;
  const at = (offset) => {
    const span = spans.find((s) => +s.dataset.start <= offset && offset <= +s.dataset.start + s.textContent.length);
    return [span.firstChild, offset - +span.dataset.start];
  };
  const range = document.createRange();
  range.setStart(...at(start));
  range.setEnd(...at(start + needle.length));
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  box.dispatchEvent(new MouseEvent("mouseup", {bubbles: true}));
  return true;
}"""


def ward_domain(name: str = "Ward note", policies: tuple[dict, ...] = ()) -> Domain:
    """A domain built like the demo's clinical one (prompt and glossary), with its own policies."""
    clinical = DOMAINS[0]
    domain = Domain.objects.create(
        name=name,
        slug=name.lower().replace(" ", "-"),
        specialty="medical",
        system_prompt=clinical["system_prompt"],
    )
    glossary = Glossary.objects.create(domain=domain, name=clinical["glossary"])
    for term, preferred, code, note in clinical["terms"]:
        GlossaryTerm.objects.create(
            glossary=glossary, term=term, preferred=preferred, code=code, note=note
        )
    for order, spec in enumerate(policies):
        PausePolicy.objects.create(domain=domain, order=order, **spec)
    return domain


def start_in_browser(page, server_url: str, domain: Domain, max_new_tokens: int) -> int:
    """Start a session from the new-session form (services must not run on Playwright's loop)."""
    page.goto(server_url + "/sessions/new")
    page.select_option("#id_domain", label=domain.name)
    page.fill("#id_input_text", CASE)
    page.fill("#id_seed", "3")
    page.fill("#id_max_new_tokens", str(max_new_tokens))
    page.click("#start-session")
    page.wait_for_url("**/sessions/*/")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def page_text(page) -> str:
    """The text as it stands: what the tokens show, less the tracked deletions beside it."""
    return page.evaluate(
        """() => {
            const box = document.getElementById('tokens').cloneNode(true);
            box.querySelectorAll('del').forEach((deleted) => deleted.remove());
            return box.textContent;
        }"""
    )


def wait_for_text(page, needle: str, timeout: float = 60_000) -> None:
    page.wait_for_function(
        "(needle) => document.getElementById('tokens').textContent.includes(needle)",
        arg=needle,
        timeout=timeout,
    )


def wait_for_status(page, status: str, timeout: float = 60_000) -> None:
    page.wait_for_selector(f'#status[data-status="{status}"]', timeout=timeout)


def wait_until_paused(page) -> None:
    wait_for_status(page, "paused")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")


def test_it_lets_a_doctor_pause_inspect_replace_a_term_resume_and_approve(
    page, server_url, celery_worker_process, alice
):
    domain = ward_domain()
    term = GlossaryTerm.objects.get(glossary__domain=domain, term="high blood pressure")
    log_in(page, server_url, "alice", "alice-password-1")

    sid = start_in_browser(page, server_url, domain, max_new_tokens=64)
    assert ReviewSession.objects.get(pk=sid).owner == alice

    # Tokens arrive live; a dropped connection reconnects and fills in without duplicates.
    page.wait_for_function("() => caesura.state.tokens.length >= 4", timeout=60_000)
    page.evaluate("() => caesura.drop()")
    page.wait_for_selector('#connection[data-state="connected"]')
    wait_for_text(page, "high blood pressure")
    page.keyboard.press("Space")
    wait_until_paused(page)

    paused = ReviewSession.objects.get(pk=sid)
    assert page_text(page) == paused.text
    assert page.evaluate("() => caesura.state.tokens.length") == len(paused.generated_ids)
    assert page.locator("#pause-reason").inner_text().strip()
    page.click("#attention-expert summary")
    page.wait_for_selector("#pause-heatmap .main-svg")
    show_live_heatmap(page)
    page.evaluate("() => caesura.showHeadsOf(4)")  # as clicking layer 4 in the heatmap does
    page.wait_for_function(
        "() => document.getElementById('heads-title').textContent.endsWith(' 4')", timeout=60_000
    )
    shown = page.locator("#alternatives button.alt").count()
    assert shown == len(paused.pauses.get().alternatives) and shown >= 2

    page.locator("#tokens .word:not(.blank)").nth(2).hover()
    assert "Probability" in page.locator("#tip").inner_text()
    page.mouse.move(0, 0)  # the tooltip would cover the text in the screenshot
    screenshot(page, "session-paused-en")
    screenshot(page, "session-paused-en-full", full_page=True)
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    wait_until_paused(page)
    page.wait_for_selector("#attention-legend:not([hidden]) #attention-top q")
    screenshot(page, "session-paused-zh-hans")
    page.click('button.lang[value="en"]')
    page.wait_for_selector('html[lang="en"]')
    wait_until_paused(page)

    assert page.evaluate(SELECT_TEXT, "high blood pressure")
    page.wait_for_selector("#edit-panel:not([hidden])")
    assert page.locator("#edit-selection").inner_text() == "high blood pressure"
    page.click(f'#glossary-terms button[data-term="{term.pk}"]')
    wait_for_text(page, term.preferred)
    edited = ReviewSession.objects.get(pk=sid)
    assert "high blood pressure" not in edited.text and term.preferred in edited.text
    assert page_text(page) == edited.text
    # The edited text is kept token by token underneath its words.
    assert page.evaluate("() => caesura.state.tokens.length") == len(edited.generated_ids)
    assert page.locator("#tokens .tok.edited").count() >= 2

    page.click("#toggle-run")
    wait_for_status(page, "generated")
    page.wait_for_function(
        "(n) => document.getElementById('tokens').textContent.length > n", arg=len(edited.text)
    )
    done = ReviewSession.objects.get(pk=sid)
    assert done.text.startswith(edited.text) and len(done.text) > len(edited.text)
    assert page_text(page) == done.text

    page.fill("#decision-comment", "Matches the chart.")
    page.click("#approve")
    wait_for_status(page, "completed")
    page.wait_for_selector("#timeline li:has-text('Approved')")
    approved = ReviewSession.objects.get(pk=sid)
    assert (approved.status, approved.decision_comment) == ("completed", "Matches the chart.")

    page.goto(server_url + "/?status=completed")
    row = page.locator(f'table.sessions tr:has(a[href="/sessions/{sid}/"])')
    assert "approved" in row.inner_text()
    screenshot(page, "session-list")


def test_it_shows_why_a_policy_paused_with_the_matched_text_highlighted(
    page, server_url, celery_worker_process, alice
):
    policy = {
        "name": "Blood pressure",
        "kind": "keyword",
        "params": {"keywords": ["blood pressure"]},
    }
    domain = ward_domain("Ward note BP", (policy,))
    log_in(page, server_url, "alice", "alice-password-1")
    sid = start_in_browser(page, server_url, domain, max_new_tokens=30)

    wait_until_paused(page)
    reason = page.locator("#pause-reason")
    assert "Blood pressure" in reason.inner_text()
    pause = ReviewSession.objects.get(pk=sid).pauses.get()
    assert pause.reason in reason.inner_text()
    assert page.locator("#pause-reason mark").inner_text() == "blood pressure"
    highlighted = "".join(page.locator("#tokens .tok.match").all_inner_texts())
    assert "blood pressure" in highlighted
    assert "chest pain" not in highlighted

    # In Chinese the reason is told in Chinese, from the decision's evidence.
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    wait_until_paused(page)
    assert "出现关键词“blood pressure”" in page.locator("#pause-reason").inner_text()
    page.click('button.lang[value="en"]')
    page.wait_for_selector('html[lang="en"]')


def test_it_rolls_back_to_a_right_clicked_word_and_continues_from_the_chosen_alternative(
    page, server_url, celery_worker_process, alice
):
    domain = ward_domain()
    log_in(page, server_url, "alice", "alice-password-1")
    sid = start_in_browser(page, server_url, domain, max_new_tokens=60)
    page.wait_for_function("() => caesura.state.tokens.length >= 12", timeout=60_000)
    page.click("#toggle-run")
    wait_until_paused(page)

    # A word the model wrote in several pieces (the seed's note has some early on).
    clicked = page.locator("#tokens .word:not(.blank):has(.tok + .tok)").first
    keep, last = (int(clicked.get_attribute(f"data-{end}")) for end in ("first", "last"))
    assert last > keep
    before = page.evaluate(
        "(n) => caesura.state.tokens.slice(0, n).map((t) => t.text).join('')", keep
    )
    clicked.click()
    assert page.locator("#token-menu").is_hidden()  # a plain click never offers a rollback
    clicked.click(button="right")
    page.click("#rollback-here")
    page.wait_for_function("(n) => caesura.state.tokens.length === n", arg=keep)
    rolled = ReviewSession.objects.get(pk=sid)
    assert len(rolled.generated_ids) == keep and page_text(page) == rolled.text
    assert rolled.text == before  # all of the word went, not only its last pieces

    second = page.locator("#alternatives button.alt").nth(1)
    chosen = int(second.get_attribute("data-token-id"))
    second.click()
    wait_for_status(page, "generated")
    done = ReviewSession.objects.get(pk=sid)
    assert done.generated_ids[keep] == chosen
    assert len(done.generated_ids) > keep + 1
    assert page_text(page) == done.text


def test_it_tells_another_reviewer_the_session_is_not_found(page, server_url, alice, bob):
    session = make_session(alice)
    log_in(page, server_url, "bob", "bob-password-1")
    response = page.goto(f"{server_url}/sessions/{session.pk}/")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Session not found"
    assert session.input_text not in page.content()


def test_a_press_just_after_a_policy_paused_does_not_resume(
    page, server_url, celery_worker_process, alice
):
    """A reviewer pressing Space to pause, a moment after a policy paused, meant "pause"."""
    policy = {"name": "Blood pressure", "kind": "keyword", "params": {"keywords": ["blood"]}}
    domain = ward_domain("Ward note race", (policy,))
    log_in(page, server_url, "alice", "alice-password-1")
    sid = start_in_browser(page, server_url, domain, max_new_tokens=40)
    wait_for_status(page, "paused")
    page.keyboard.press("Space")
    page.wait_for_selector("#notice:not([hidden])")
    assert "just paused" in page.locator("#notice").inner_text()
    page.wait_for_timeout(1500)
    assert ReviewSession.objects.get(pk=sid).status == ReviewSession.PAUSED
    page.keyboard.press("Space")  # a second press, later: the reviewer does mean resume
    page.wait_for_function(
        "() => document.getElementById('status').dataset.status !== 'paused'", timeout=60_000
    )


def test_it_corrects_a_generated_text_before_approving_it(
    page, server_url, celery_worker_process, alice
):
    """No pause needed: a generated text takes a correction, which reopens it at its end."""
    domain = ward_domain("Ward note final")
    term = GlossaryTerm.objects.get(glossary__domain=domain, term="high blood pressure")
    log_in(page, server_url, "alice", "alice-password-1")
    sid = start_in_browser(page, server_url, domain, max_new_tokens=12)
    wait_for_status(page, "generated")
    before = ReviewSession.objects.get(pk=sid).text
    first = page.locator("#tokens .word:not(.blank)").first.inner_text().strip()
    assert page.evaluate(SELECT_TEXT, first)
    page.wait_for_selector("#edit-panel:not([hidden])")
    page.fill("#edit-text", term.preferred)
    page.click("#edit-apply")
    wait_for_text(page, term.preferred)
    wait_for_status(page, "paused")
    corrected = ReviewSession.objects.get(pk=sid)
    assert corrected.text == before.replace(first, term.preferred, 1)
    assert page_text(page) == corrected.text
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    # Reopened: it may run on from the correction (Resume, and the space bar), and how the
    # model had stopped is no longer what the page says.
    resume = page.locator("#toggle-run")
    assert resume.is_visible() and resume.is_enabled() and resume.inner_text() == "Resume"
    assert page.locator("#stop-reason").is_hidden()
    # Why it is paused: the correction reopened it; nobody pressed Pause.
    reopened = "Reopened to correct the generated text"
    assert page.locator("#pause-reason .reason-main").inner_text() == reopened
    screenshot(page, "session-generated-corrected-en")
    page.reload()  # as rendered by the server
    wait_for_status(page, "paused")
    page.wait_for_selector("#pause-panel:not([hidden]) #alternatives button.alt")
    assert page.locator("#pause-reason .reason-main").inner_text() == reopened
    assert page.locator("#toggle-run").is_visible() and page.locator("#stop-reason").is_hidden()
    page.locator("#toggle-run").click()
    # It runs on from the correction, until its limit or the next policy pause.
    resumed = lambda: ReviewSession.objects.get(pk=sid).audit.filter(action="resume").exists()  # noqa: E731
    wait_for(resumed, what="the resume")
    wait_for(
        lambda: ReviewSession.objects.get(pk=sid).status in ("paused", "generated"),
        what="the end of the run",
    )
    status = ReviewSession.objects.get(pk=sid).status
    wait_for_status(page, status)
    if status == "generated":  # it stopped again, and says why; nothing left to resume
        assert (
            page.locator("#stop-reason").is_visible() and page.locator("#run-controls").is_hidden()
        )
    page.click("#approve")
    wait_for_status(page, "completed")
    approved = ReviewSession.objects.get(pk=sid)
    assert approved.status == "completed" and approved.text.startswith(corrected.text)
    assert page_text(page) == approved.text
