"""The session page's connection in a real browser: a finished session shows how it ended at
once, and a command given while the server is away is neither lost nor run twice.
Screenshots land in artifacts/screenshots/."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reviewer import events
from reviewer.lifecycle import audit
from reviewer.models import AuditRecord, ReviewSession, SessionEvent
from tests.browser.conftest import log_in, screenshot, show_live_heatmap
from tests.browser.test_review_ui import start_in_browser, wait_for_status, ward_domain
from tests.conftest import REPO, free_port, server_env, wait_for, wait_until_serving
from tests.session_factory import TEXT, make_session

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]
S = ReviewSession
PHONE = {"width": 390, "height": 844}

# Runs before the page's own scripts, on every load: notes any moment at which the page
# offered Resume, showed "paused" or opened the pause panel.
WATCH_FOR_RESUME = """
window.__offered = [];
const look = (when) => {
  const toggle = document.getElementById("toggle-run");
  const status = document.getElementById("status");
  const panel = document.getElementById("pause-panel");
  if (toggle && !toggle.disabled) window.__offered.push(`${when}: enabled ${toggle.textContent}`);
  if (status && status.dataset.status === "paused") window.__offered.push(`${when}: paused badge`);
  if (panel && !panel.hidden) window.__offered.push(`${when}: pause panel`);
};
new MutationObserver(() => look("change")).observe(document, {
  subtree: true, childList: true, attributes: true, characterData: true,
});
document.addEventListener("DOMContentLoaded", () => {
  look("DOMContentLoaded");
  window.__atReady = {
    status: document.getElementById("status").dataset.status,
    text: document.getElementById("tokens").textContent,
    decided: document.getElementById("decided-text").textContent,
  };
});
window.addEventListener("load", () => look("load"));
"""
WORDS = ["The", " patient", " has", " a", " fever."]  # TEXT, as the model wrote it


def store(session_id: int, type: str, payload: dict) -> None:
    """An event as the worker leaves it (nobody is listening yet, so nothing to broadcast)."""
    SessionEvent.objects.create(
        session_id=session_id, seq=events.next_seq(session_id), type=type, payload=payload
    )


def finished_with_history(owner, status: str, **fields) -> ReviewSession:
    """A session that ran, paused twice, was resumed and ended, with the events it left."""
    session = make_session(owner, status=status, **fields)
    emit = store
    emit(session.pk, "status", {"status": "running"})
    for position, word in enumerate(WORDS):
        if position in (2, 4):
            emit(session.pk, "status", {"status": "paused"})
            emit(
                session.pk,
                "pause",
                {
                    "position": position,
                    "trigger": "manual",
                    "kind": "manual",
                    "reason": "Reviewer asked",
                    "alternatives": [],
                },
            )
            emit(session.pk, "resumed", {"position": position})
            emit(session.pk, "status", {"status": "running"})
        emit(
            session.pk,
            "token",
            {
                "position": position,
                "token_id": 11 + position,
                "text": word,
                "probability": 0.5,
                "entropy": 1.0,
                "alternatives": [],
                "attention": [0.25] * (position + 4),
            },
        )
    emit(session.pk, "finish", {"reason": "eos", "text": TEXT})
    for action, payload in [
        ("start", {"domain": session.domain.name}),
        ("paused", {"trigger": "manual", "reason": "Reviewer asked", "position": 2}),
        ("resume", {}),
        ("generated", {"reason": "eos", "tokens": 5}),
    ]:
        audit.append(action, "alice" if action == "resume" else "engine", session, payload)
    if status in (S.COMPLETED, S.REJECTED):
        action = "approve" if status == S.COMPLETED else "reject"
        audit.append(action, "alice", session, {"comment": session.decision_comment})
    emit(session.pk, "status", {"status": "generated"})
    if status != S.GENERATED:
        emit(session.pk, "status", {"status": status})
    return session


def at_phone_width(page) -> None:
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(500)  # Plotly redraws its figures for the narrower window


def open_and_check_final_state(page, url: str, status: str, decided: str) -> None:
    page.goto(url)
    ready = page.evaluate("() => window.__atReady")
    assert ready["status"] == status and ready["text"] == TEXT
    if decided:
        assert ready["decided"] == decided
    page.wait_for_function("() => caesura.state.live && caesura.state.tokens.length === 5")
    page.wait_for_selector("#tokens .tok >> nth=4")
    assert page.locator("#tokens").inner_text() == TEXT
    assert page.locator("#status").get_attribute("data-status") == status
    if status == S.GENERATED:  # hidden and disabled: a correction may reopen it to run on
        assert page.locator("#run-controls").is_hidden()
        assert page.locator("#toggle-run").is_disabled()
    else:  # ended: not even a greyed control
        assert page.locator("#run-controls, #toggle-run").count() == 0
    assert page.locator("#notice").is_hidden()  # the replay told nothing old as news
    show_live_heatmap(page)
    page.wait_for_selector("#timeline li")
    if decided:
        assert page.locator("#decided-text").inner_text() == decided
    assert page.evaluate("() => window.__offered") == []


@pytest.mark.parametrize(
    ("status", "fields", "decided"),
    [
        (S.COMPLETED, {"decision_comment": "Matches the chart."}, "approved: Matches the chart."),
        (S.REJECTED, {"decision_comment": "Wrong dose."}, "rejected: Wrong dose."),
        (S.CANCELLED, {}, "cancelled"),
        (S.GENERATED, {}, ""),
    ],
)
def test_it_shows_a_finished_session_as_it_ended_and_never_offers_resume(
    page, server_url, alice, status, fields, decided
):
    session = finished_with_history(alice, status, **fields)
    page.add_init_script(WATCH_FOR_RESUME)
    log_in(page, server_url, "alice", "alice-password-1")
    url = f"{server_url}/sessions/{session.pk}/"
    open_and_check_final_state(page, url, status, decided)
    if status == S.GENERATED:
        assert page.locator("#decision-panel").is_visible()
    if status != S.COMPLETED:
        return
    screenshot(page, "session-finished-en")
    at_phone_width(page)
    screenshot(page, "session-finished-en-phone", full_page=True)
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    page.set_viewport_size({"width": 1280, "height": 800})
    open_and_check_final_state(page, url, status, "")
    assert page.locator("#decided-text").inner_text() == "已批准：Matches the chart."
    screenshot(page, "session-finished-zh-hans")
    at_phone_width(page)
    screenshot(page, "session-finished-zh-hans-phone", full_page=True)


class RestartableServer:
    """The app under its own daphne, which a test may stop and start again on the same port,
    as a deploy or a crash does; the shared server of the other tests stays up."""

    def __init__(self, db_name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = server_env(db_name)
        self.log_path = REPO / "var" / "test-daphne-restart.log"
        self.log = self.log_path.open("w")
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port)]
        self.process = subprocess.Popen(
            [*command, "webapp.asgi:application"],
            cwd=REPO,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_until_serving(self.url, self.process)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def restartable_server(django_db_setup):
    from django.conf import settings

    server = RestartableServer(settings.DATABASES["default"]["NAME"])
    server.start()
    yield server
    server.stop()
    server.log.close()


def frames_of(page) -> list[dict]:
    """Every command the page sends, on any of its sockets."""
    sent: list[dict] = []

    def watch(socket) -> None:
        socket.on("framesent", lambda payload: sent.append(json.loads(payload)))

    page.on("websocket", watch)
    return sent


def pause_when_a_few_tokens_are_in(page) -> None:
    page.wait_for_function("() => caesura.state.tokens.length >= 4", timeout=120_000)
    page.click("#toggle-run")
    wait_for_status(page, "paused", timeout=120_000)
    page.wait_for_selector("#toggle-run:not([disabled])")


def resume_while_the_server_is_down(
    page, server, session_id: int, shot: str, restart: bool = True
) -> None:
    server.stop()
    page.wait_for_selector('#connection[data-state="reconnecting"]')
    page.click("#toggle-run")
    pending = page.locator('#pending li[data-command="resume"]')
    assert pending.get_attribute("data-state") == "queued"
    assert page.locator("#toggle-run").is_disabled()
    assert not page.locator("#notice.bad").is_visible()  # no red banner: the command is kept
    page.wait_for_timeout(1500)  # a reconnect attempt fails meanwhile; the command stays queued
    assert pending.get_attribute("data-state") == "queued"
    page.mouse.move(0, 0)
    screenshot(page, shot)
    at_phone_width(page)
    screenshot(page, f"{shot}-phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert ReviewSession.objects.get(pk=session_id).status == S.PAUSED  # nothing reached it
    assert not AuditRecord.objects.filter(session_id=session_id, action="resume").exists()
    if restart:
        server.start()


def sent_resumes(frames: list[dict]) -> list[str]:
    return [f["command_id"] for f in frames if f.get("command") == "resume"]


@pytest.mark.slow
@pytest.mark.model
def test_it_keeps_a_resume_given_while_the_server_is_down_and_resumes_exactly_once(
    page, restartable_server, celery_worker_process, alice
):
    server = restartable_server
    frames = frames_of(page)
    domain = ward_domain()
    log_in(page, server.url, "alice", "alice-password-1")
    sid = start_in_browser(page, server.url, domain, max_new_tokens=60)
    pause_when_a_few_tokens_are_in(page)

    resume_while_the_server_is_down(page, server, sid, "session-pending-en")
    page.wait_for_selector('#connection[data-state="connected"]', timeout=30_000)
    page.wait_for_selector("#pending", state="hidden", timeout=30_000)
    wait_for_status(page, "generated", timeout=180_000)

    session = ReviewSession.objects.get(pk=sid)
    assert AuditRecord.objects.filter(session=session, action="resume").count() == 1
    pause = session.pauses.get()
    assert pause.resumed_at is not None and pause.outcome == "resumed"
    assert len(set(sent_resumes(frames))) == 1
    assert page.locator("#tokens").inner_text() == session.text

    # An answer lost with the connection: the page sends the approval again under the same
    # command_id, and the server, having run it once, answers from its receipt.
    page.fill("#decision-comment", "Checked after the restart.")
    page.evaluate("() => { document.getElementById('approve').click(); caesura.drop(); }")
    wait_for_status(page, "completed")
    page.wait_for_selector("#pending", state="hidden")
    approvals = [f["command_id"] for f in frames if f.get("command") == "approve"]
    assert len(approvals) >= 1 and len(set(approvals)) == 1
    assert AuditRecord.objects.filter(session=session, action="approve").count() == 1
    assert page.locator("#decided-text").inner_text() == "approved: Checked after the restart."
    assert not page.locator("#notice.bad").is_visible()  # no "cannot approve" for the repeat

    # The same in Chinese, on a new session.
    page.click('button.lang[value="zh-hans"]')
    page.wait_for_selector('html[lang="zh-hans"]')
    second = start_in_browser(page, server.url, domain, max_new_tokens=60)
    pause_when_a_few_tokens_are_in(page)
    resume_while_the_server_is_down(page, server, second, "session-pending-zh-hans", False)
    # The reviewer leaves the page before the server is back, and opens it again later: the
    # queued resume was kept in the tab and goes from the new page.
    queued = page.locator('#pending li[data-command="resume"]').get_attribute("data-command-id")
    page.goto("about:blank")
    server.start()
    page.goto(f"{server.url}/sessions/{second}/")
    wait_for(
        lambda: AuditRecord.objects.filter(session_id=second, action="resume").exists(),
        timeout=60,
        what="the queued resume to reach the restarted server",
    )
    page.wait_for_selector("#pending", state="hidden", timeout=30_000)
    wait_for_status(page, "generated", timeout=180_000)
    assert AuditRecord.objects.filter(session_id=second, action="resume").count() == 1
    assert queued and sent_resumes(frames)[-1] == queued  # the click from the page left behind
    assert page.evaluate("() => sessionStorage.length") == 0  # answered: nothing kept

    log = server.log_path.read_text()
    assert "Timeout reading" not in log and "Traceback" not in log
