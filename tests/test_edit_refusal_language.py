"""An edit the worker refuses (the text moved under it, a range no longer in the text) is
told to every page watching the session in that page's language: stored and sent in
English with its template and values, translated by each socket, live and on replay."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from channels.db import database_sync_to_async
from django.utils import translation

from inference import edits
from reviewer import events
from reviewer.analytics import timeline
from reviewer.models import AuditRecord, Edit, SessionEvent
from reviewer.web import ui_text
from reviewer.worker import runtime
from tests.test_command_language import page_socket
from tests.test_consumer import close_thread_connections  # noqa: F401

CHANGED_EN = "The text changed since this edit was made; select the span again"
CHANGED_ZH = "提交此编辑后文本已有改动；请重新选择该片段"
ZH = [(b"cookie", b"django_language=zh-hans")]
EN = [(b"accept-language", b"en")]


def refuse_pending_edit(session) -> Edit:
    """The worker applies the waiting edit to a state whose text is not the one the
    reviewer selected in: it refuses it, as apply_pending_edits does."""
    moved = SimpleNamespace(text="Something else was written meanwhile.")
    assert runtime.apply_pending_edits(session, moved) is None  # nothing applied
    return Edit.objects.get(session=session)


async def next_event(communicator, kind: str) -> dict:
    while True:
        event = await communicator.receive_json_from(timeout=5)
        if event.get("type") == kind:
            return event


@pytest.mark.django_db
def test_it_stores_the_refusal_in_english_with_its_template(paused_with_pending_edit):
    edit = refuse_pending_edit(paused_with_pending_edit)
    assert edit.error == CHANGED_EN and not edit.applied
    stored = SessionEvent.objects.get(session=paused_with_pending_edit, type=events.ERROR)
    assert stored.payload == {
        "message": CHANGED_EN,
        "template": CHANGED_EN,
        "values": {},
        "edit": edit.pk,
    }
    audit = AuditRecord.objects.get(session=paused_with_pending_edit, action="edit_refused")
    assert audit.payload["error"] == CHANGED_EN


@pytest.mark.django_db(transaction=True)
async def test_it_tells_each_watching_page_in_its_own_language(alice, paused_with_pending_edit):
    session = paused_with_pending_edit
    async with (
        page_socket(session.pk, alice, ZH) as chinese,
        page_socket(session.pk, alice, EN) as english,
    ):
        await database_sync_to_async(refuse_pending_edit)(session)
        live_zh = await next_event(chinese, events.ERROR)
        live_en = await next_event(english, events.ERROR)
    assert live_zh["message"] == CHANGED_ZH
    assert live_en["message"] == CHANGED_EN
    assert live_zh["edit"] == live_en["edit"]
    async with page_socket(session.pk, alice, ZH) as reopened:  # a page opened later replays it
        assert (await next_event(reopened, events.ERROR))["message"] == CHANGED_ZH


@pytest.mark.parametrize(
    ("edit", "chinese"),
    [
        ({"kind": "truncate", "position": 99}, "截断位置 99 超出 [0, 3]"),
        ({"kind": "replace", "start": 2, "end": 40, "text": "x"}, "字符范围 [2, 40) 超出 [0, 9]"),
        ({"kind": "append", "text": ""}, "追加需要文本"),
        ({"kind": "fold"}, "编辑类型必须是以下之一：replace, choose, truncate, append"),
    ],
)
def test_it_translates_what_the_engine_says_of_a_bad_edit(edit, chinese):
    """The engine's own refusals keep their template and values through the event."""
    from django.utils import translation

    state = SimpleNamespace(text="Fever 39.", generated_ids=[1, 2, 3])
    with pytest.raises(edits.EditError) as refused:
        edits._plan(None, state, [edits.from_dict(edit)])  # type: ignore[arg-type]
    payload = events.error(runtime.refusal(refused.value), 7)
    assert payload["message"] == str(refused.value)  # English, as stored
    with translation.override("zh-hans"):
        assert ui_text.event_message({"type": "error", **payload}) == chinese


def test_it_keeps_the_english_message_when_a_stored_template_does_not_fit():
    event = {"type": "error", "message": "old words", "template": "%(gone)s", "values": {}}
    assert ui_text.event_message(event) == "old words"


@pytest.mark.django_db
def test_it_tells_the_refusal_in_the_timeline_in_the_readers_language(paused_with_pending_edit):
    refuse_pending_edit(paused_with_pending_edit)

    def told(language: str) -> str:
        with translation.override(language):
            entries = timeline.timeline(paused_with_pending_edit)
        return next(e for e in entries if e["kind"] == "edit_refused")["detail"]

    assert told("zh-hans") == CHANGED_ZH and told("en") == CHANGED_EN
