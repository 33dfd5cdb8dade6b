"""The timeline tells a session's audit records in the reader's language: policy and domain
display names, the policy's reason from its evidence, how generation stopped, who acted (a
manual pause is the reviewer's who asked for it, an application is named as people read it)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import translation

from reviewer.analytics.timeline import actor_name, timeline
from reviewer.lifecycle import audit
from reviewer.models import PauseEvent, PausePolicy, ReviewSession
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def compiled_catalogs(settings):
    call_command("compile_translations", verbosity=0)
    settings.LOCALE_PATHS = list(settings.LOCALE_PATHS)


@pytest.fixture
def history(alice):
    """Alice's session: started, paused by a low-confidence policy, stopped at the limit."""
    session = make_session(alice, max_new_tokens=120)
    domain = session.domain
    domain.name_zh = "临床记录"
    domain.save()
    PausePolicy.objects.create(
        domain=domain, name="Unsure", name_zh="不确定", kind="low_confidence", params={}
    )
    pause = session.pauses.get()
    pause.trigger, pause.kind = "Unsure", "low_confidence"
    pause.evidence = {"top1_prob": 0.2412, "threshold": 0.35}
    pause.save()
    audit.append("start", "alice", session, {"domain": domain.name})
    audit.append(
        "paused",
        "engine",
        session,
        {"trigger": "Unsure", "reason": "top-1 0.24 < 0.35", "position": pause.position},
    )
    audit.append("pause_requested", "alice", session)
    audit.append("paused", "engine", session, {"trigger": "manual", "reason": "Paused: manual"})
    audit.append("generated", "engine", session, {"reason": "max_tokens", "tokens": 120})
    audit.append("approve", "alice", session, {"comment": "Fine as written."})
    return session


def entries(client, session, language: str) -> list[dict]:
    client.post("/i18n/setlang/", {"language": language, "next": "/"})
    return client.get(f"/sessions/{session.pk}/audit").json()["entries"]


def test_it_tells_the_timeline_in_english(client, alice, history):
    client.force_login(alice)
    told = entries(client, history, "en")
    kinds = ["start", "paused", "pause_requested", "paused", "generated", "approve"]
    assert [e["kind"] for e in told] == kinds
    assert told[0]["detail"] == "Clinical notes"
    assert told[1]["detail"] == "Unsure: Top-1 probability 24% is below 35%"
    assert told[4]["detail"] == "120 tokens: Stopped: reached the 120-token limit."
    assert told[1]["actor"] == "system" and told[5]["actor"] == "alice"
    assert told[3]["actor"] == "alice"  # the pause she asked for, though the engine made it
    assert told[5]["quotes"] and not told[1]["quotes"]


def test_it_tells_the_timeline_in_chinese(client, alice, history):
    client.force_login(alice)
    told = entries(client, history, "zh-hans")
    actions = ["会话已开始", "已暂停", "已请求暂停", "已暂停", "生成已结束", "已批准"]
    assert [e["action"] for e in told] == actions
    assert told[0]["detail"] == "临床记录"
    assert told[1]["detail"] == "不确定：最高概率 24% 低于 35%"
    assert told[4]["detail"] == "120 个词元：已停止：达到 120 个词元的上限。"
    assert told[1]["actor"] == "系统"
    assert told[5]["detail"] == "Fine as written."  # a person's words stay as written


def told_to(session, reader, language: str = "en") -> list[dict]:
    with translation.override(language):
        return timeline(session, reader)


def test_a_manual_pause_is_the_reviewers_who_asked_not_the_systems(alice, history):
    [_, policy, _, manual, *_] = told_to(history, alice)
    assert (policy["actor"], policy["actor_id"]) == ("system", "engine")
    assert (manual["actor"], manual["actor_id"]) == ("alice", "alice")
    assert manual["detail"] == "You paused the generation."
    [_, _, _, manual, *_] = told_to(history, "alice", "zh-hans")
    assert manual["detail"] == "你暂停了生成。" and manual["actor"] == "alice"


def test_someone_else_reading_the_trail_reads_the_reviewers_name(alice, admin_user, history):
    for reader in (admin_user, None):
        [_, _, _, manual, *_] = told_to(history, reader)
        assert manual["actor"] == "alice"
        assert manual["detail"] == "alice paused the generation."
        assert "You" not in manual["detail"]


def test_a_pause_is_credited_to_whoever_asked_for_it(alice, admin_user):
    """Staff asked for the first pause; the session's own reviewer for the second; a pause
    without a request on record is its reviewer's."""
    session = make_session(alice)
    audit.append("pause_requested", "root", session)
    audit.append("paused", "engine", session, {"trigger": "manual", "position": 3})
    audit.append("resume", "alice", session, {"paused_s": 1.0})
    audit.append("pause_requested", "alice", session)
    audit.append("paused", "engine", session, {"trigger": "Unsure", "position": 5})  # overtook
    audit.append("resume", "alice", session, {"paused_s": 1.0})
    audit.append("paused", "engine", session, {"trigger": "manual", "position": 9})
    paused = [e for e in told_to(session, alice) if e["kind"] == "paused"]
    assert [e["actor"] for e in paused] == ["root", "system", "alice"]
    assert paused[0]["detail"] == "root paused the generation."
    assert paused[2]["detail"] == "You paused the generation."
    paused = [e for e in told_to(session, admin_user) if e["kind"] == "paused"]
    assert paused[0]["detail"] == "You paused the generation."
    assert paused[2]["detail"] == "alice paused the generation."


def test_an_application_is_named_as_people_read_it(alice):
    session = make_session(alice)
    audit.append("start", "app:Demo application", session, {"domain": "Clinical notes"})
    [started] = told_to(session, alice)
    assert started["actor"] == "Demo application (application)"
    assert started["actor_id"] == "app:Demo application"
    assert "app:" not in started["actor"]
    assert actor_name("engine") == actor_name("system") == "system"
    assert actor_name("alice") == "alice"


def test_it_tells_each_pause_at_a_shared_position_by_its_own_evidence(alice):
    """Rolled back to before position 5, the run paused at 5 again, for another policy; a
    reopen there (no "paused" record of its own) is no policy's pause."""
    session = make_session(alice, ReviewSession.COMPLETED)
    halted = dt.datetime(2025, 3, 3, 9, 0, tzinfo=dt.UTC)
    told = [
        ("Dosage", "keyword", 'Keyword "mg" appeared', {"keyword": "mg"}),
        ("manual", PauseEvent.REOPENED, "Reopened", {}),
        ("Unsure", "low_confidence", "top-1 0.2 < 0.3", {"top1_prob": 0.2, "threshold": 0.3}),
    ]
    for minutes, (trigger, kind, reason, evidence) in enumerate(told):
        PauseEvent.objects.create(
            session=session,
            position=5,
            trigger=trigger,
            kind=kind,
            reason=reason,
            evidence=evidence,
            halted_at=halted + dt.timedelta(minutes=minutes),
        )
        if kind != PauseEvent.REOPENED:
            paused = {"trigger": trigger, "reason": reason, "position": 5}
            audit.append("paused", "engine", session, paused)
        audit.append("truncate_requested", "alice", session, {"start": 3})
    paused = [e["detail"] for e in told_to(session, alice) if e["kind"] == "paused"]
    assert paused == [
        'Dosage: Keyword "mg" appeared',
        "Unsure: Top-1 probability 20% is below 30%",
    ]
