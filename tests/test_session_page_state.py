"""The session page as the server renders it: the session's current state, before any script."""

from __future__ import annotations

import re
from html import unescape

import pytest

from reviewer import events
from reviewer.models import ReviewSession
from tests.session_factory import TEXT, make_session
from tests.test_reviewer_pages import page_data

pytestmark = pytest.mark.django_db
S = ReviewSession


def element(html: str, element_id: str) -> str:
    """The opening tag and text of the element with this id (no nested tags expected)."""
    match = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>[^<]*', html)
    assert match, f"#{element_id} is missing"
    return unescape(match.group(0))


def is_hidden(tag: str) -> bool:
    return re.search(r"\shidden[\s>]", tag.split(">")[0] + ">") is not None


def rendered(client, session) -> str:
    return client.get(f"/sessions/{session.pk}/").content.decode()


def with_history(session: ReviewSession) -> ReviewSession:
    """The events of a session that paused, resumed and finished, as the worker stores them."""
    for status in ("running", "paused"):
        events.emit(session.pk, "status", {"status": status})
    events.emit(session.pk, "pause", {"position": 5, "trigger": "manual", "alternatives": []})
    for status in ("running", "generated", session.status):
        events.emit(session.pk, "status", {"status": status})
    session.refresh_from_db()
    return session


@pytest.mark.parametrize(
    ("status", "comment", "error", "shown"),
    [
        (S.COMPLETED, "Matches the chart.", "", "approved: Matches the chart."),
        (S.REJECTED, "Wrong dose.", "", "rejected: Wrong dose."),
        (S.CANCELLED, "", "", "cancelled"),
    ],
)
def test_it_renders_a_finished_session_as_it_ended_with_nothing_to_resume(
    client, alice, status, comment, error, shown
):
    session = with_history(
        make_session(alice, status=status, decision_comment=comment, error=error)
    )
    client.force_login(alice)
    html = rendered(client, session)

    badge = element(html, "status")
    assert f'data-status="{status}"' in badge
    assert is_hidden(element(html, "run-controls"))
    toggle = element(html, "toggle-run")
    assert " disabled" in toggle and "Resume" not in toggle
    assert element(html, "tokens").endswith(TEXT)
    decided = element(html, "decided-panel")
    assert not is_hidden(decided)
    assert element(html, "decided-text").endswith(shown)
    assert is_hidden(element(html, "decision-panel"))
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["status"] == status and data["lastSeq"] == session.last_seq > 0


def test_it_renders_a_failed_session_with_its_error_and_resume_from_the_stored_tokens(
    client, alice
):
    session = with_history(
        make_session(alice, status=S.FAILED, error="The model ran out of memory")
    )
    client.force_login(alice)
    html = rendered(client, session)
    assert 'data-status="failed"' in element(html, "status")
    assert element(html, "decided-text").endswith("failed: The model ran out of memory")
    assert not is_hidden(element(html, "run-controls"))
    toggle = element(html, "toggle-run")
    assert " disabled" not in toggle and toggle.endswith("Resume")
    assert is_hidden(element(html, "decision-panel"))


def test_it_renders_a_generated_session_awaiting_the_decision(client, alice):
    session = with_history(make_session(alice, status=S.GENERATED))
    client.force_login(alice)
    html = rendered(client, session)
    assert " disabled" in element(html, "toggle-run")
    assert not is_hidden(element(html, "decision-panel"))
    assert is_hidden(element(html, "decided-panel"))


def test_it_renders_a_paused_session_with_resume_offered(client, alice):
    session = make_session(alice)
    client.force_login(alice)
    html = rendered(client, session)
    assert not is_hidden(element(html, "run-controls"))
    toggle = element(html, "toggle-run")
    assert " disabled" not in toggle and toggle.endswith("Resume")


def test_it_names_the_commands_the_page_may_show_as_pending(client, alice):
    session = make_session(alice)
    client.force_login(alice)
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["commandLabels"]["resume"] == "Resume"
    assert "%(command)s" in data["labels"]["commandQueued"]
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    chinese = page_data(client.get(f"/sessions/{session.pk}/"))
    assert chinese["commandLabels"]["resume"] == "继续"
    assert chinese["labels"]["commandQueued"] == "%(command)s：等待连接恢复…"


def test_it_tells_a_chinese_reader_how_the_session_ended(client, alice):
    session = make_session(alice, status=S.COMPLETED, decision_comment="与病历一致。")
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert element(rendered(client, session), "decided-text").endswith("已批准：与病历一致。")
