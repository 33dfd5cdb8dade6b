"""The session page as the server renders it: the session's current state, before any script."""

from __future__ import annotations

import re
from html import unescape

import pytest

from reviewer import events
from reviewer.lifecycle import audit
from reviewer.models import ReviewSession
from tests.session_factory import TEXT, make_session
from tests.test_reviewer_pages import page_data

pytestmark = [pytest.mark.django_db, pytest.mark.model]  # the page spells the prompt tokens
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
    assert 'id="run-controls"' not in html and 'id="toggle-run"' not in html
    assert "Space bar" not in html and is_hidden(element(html, "connection"))
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
    # The model has finished: nothing to pause or resume, so the controls are hidden; they
    # stay in the page, since a correction reopens the text and Resume goes on from it.
    assert is_hidden(element(html, "run-controls"))
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


def decided(session: ReviewSession, action: str, actor: str = "alice") -> ReviewSession:
    audit.append("generated", "engine", session, {"reason": "max_tokens", "tokens": 5})
    audit.append(action, actor, session, {"comment": session.decision_comment})
    return session


def test_it_shows_the_comment_who_decided_and_when(client, alice):
    session = decided(
        make_session(alice, status=S.REJECTED, decision_comment="Wrong dose."), "reject"
    )
    record = session.audit.get(action="reject")
    client.force_login(alice)
    html = rendered(client, session)
    assert element(html, "decided-text").endswith("rejected: Wrong dose.")
    by = element(html, "decided-by")
    assert not is_hidden(by) and "by alice, " in by
    data = page_data(client.get(f"/sessions/{session.pk}/"))
    assert data["decision"] == {"actor": "alice", "time": record.created_at.isoformat()}


def test_it_dates_the_decision_in_the_readers_language(client, alice):
    session = decided(make_session(alice, status=S.COMPLETED, decision_comment="好"), "approve")
    when = session.audit.get(action="approve").created_at
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    by = element(rendered(client, session), "decided-by")
    assert f"由 alice 于 {when.year}年{when.month}月{when.day}日" in by


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("max_tokens", "Stopped: reached the 200-token limit."),
        ("eos", "The model ended the note."),
    ],
)
def test_it_says_why_generation_stopped(client, alice, reason, shown):
    session = make_session(alice, status=S.GENERATED, max_new_tokens=200)
    audit.append("generated", "engine", session, {"reason": reason, "tokens": 200})
    client.force_login(alice)
    html = rendered(client, session)
    assert element(html, "stop-reason").endswith(shown)
    assert not is_hidden(element(html, "stop-reason"))


def test_it_says_the_token_limit_in_chinese(client, alice):
    session = make_session(alice, status=S.GENERATED, max_new_tokens=64)
    audit.append("generated", "engine", session, {"reason": "max_tokens", "tokens": 64})
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert element(rendered(client, session), "stop-reason").endswith(
        "已停止：达到 64 个词元的上限。"
    )


def test_a_running_session_says_nothing_about_stopping(client, alice):
    session = make_session(alice, status=S.RUNNING)
    client.force_login(alice)
    html = rendered(client, session)
    assert is_hidden(element(html, "stop-reason"))
    assert not is_hidden(element(html, "run-controls"))


def test_it_says_why_there_is_no_live_attention_on_the_vllm_backend(client, alice, settings):
    session = make_session(alice, status=S.PAUSED)
    client.force_login(alice)
    assert 'id="live-heatmap"' in rendered(client, session)
    settings.CAESURA_BACKEND = "vllm"
    html = rendered(client, session)
    assert 'id="live-heatmap"' not in html
    assert "vLLM engine" in element(html, "no-live-attention")


def test_it_tells_the_page_which_prompt_tokens_spell_the_case_text(client, alice):
    from inference.prompt import encode_prompt
    from reviewer.web.tokenizer import tokenizer

    case = "Fever since Monday.\r\n发热三天。"
    session = make_session(alice)
    session.input_text = case
    session.save(update_fields=["input_text"])
    client.force_login(alice)
    before_start = page_data(client.get(f"/sessions/{session.pk}/"))["attentionMap"]
    ids = encode_prompt(tokenizer(), case, system=session.domain.system_prompt)
    session.prompt_ids = ids  # as the worker records them when it starts the session
    session.save(update_fields=["prompt_ids"])
    shown = page_data(client.get(f"/sessions/{session.pk}/"))["attentionMap"]
    assert shown == before_start  # the page can show it before the worker has started
    assert shown["caseText"] == case and shown["promptLength"] == len(ids)
    assert len(shown["promptTokens"]) == len(shown["caseSpans"]) == len(ids)
    spans = [span for span in shown["caseSpans"] if span]
    assert "".join(case[a:b] for a, b in dict.fromkeys(map(tuple, spans))) == case
    assert shown["caseSpans"][0] is None  # <|im_start|> of the system prompt
    # The case text is rendered as it was typed; the script draws its words over it.
    assert element(rendered(client, session), "case-text").endswith(
        "Fever since Monday.\r\n发热三天。"
    )


def test_the_page_works_without_the_models_tokenizer(client, alice, monkeypatch):
    import reviewer.web.tokenizer

    def missing():
        raise OSError("no tokenizer here")

    monkeypatch.setattr(reviewer.web.tokenizer, "tokenizer", missing)
    session = make_session(alice)
    client.force_login(alice)
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200 and page_data(response)["attentionMap"] is None
