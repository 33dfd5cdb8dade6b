"""The timeline tells a session's audit records in the reader's language: policy and domain
display names, the policy's reason from its evidence, how generation stopped, who acted."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from reviewer.lifecycle import audit
from reviewer.models import PausePolicy
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
    assert [e["kind"] for e in told] == ["start", "paused", "paused", "generated", "approve"]
    assert told[0]["detail"] == "Clinical notes"
    assert told[1]["detail"] == "Unsure: top-1 0.24 < 0.35"
    assert told[2]["detail"] == "You paused the generation."
    assert told[3]["detail"] == "120 tokens: Stopped: reached the 120-token limit."
    assert told[1]["actor"] == "system" and told[4]["actor"] == "alice"
    assert told[4]["quotes"] and not told[1]["quotes"]


def test_it_tells_the_timeline_in_chinese(client, alice, history):
    client.force_login(alice)
    told = entries(client, history, "zh-hans")
    assert [e["action"] for e in told] == ["会话已开始", "已暂停", "已暂停", "生成已结束", "已批准"]
    assert told[0]["detail"] == "临床记录"
    assert told[1]["detail"] == "不确定：最高概率 0.24 低于 0.35"
    assert told[2]["detail"] == "你暂停了生成。"
    assert told[3]["detail"] == "120 个词元：已停止：达到 120 个词元的上限。"
    assert told[1]["actor"] == "系统"
    assert told[4]["detail"] == "Fine as written."  # a person's words stay as written
