"""What text may leave by delivery mode, without a worker: after_review sends nothing before
approval; delayed stays the configured sentences behind, holds at a pause, never releases a
stop string, and never takes back what it released."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.test import override_settings
from pydantic import ValidationError

from inference.config import MIN_SCALE, SamplingParams
from reviewer.gateway import schemas
from reviewer.gateway.delivery import Delivery, KeepAlive, releasable

TEXT = "First sentence. Second one. Third is being wri"


def test_it_releases_nothing_before_approval_after_review():
    for status in ("running", "paused", "generated", "rejected"):
        assert releasable("after_review", 0, status, TEXT, [], 0) == 0
    assert releasable("after_review", 0, "completed", TEXT, [], 0) == len(TEXT)


@pytest.mark.parametrize(
    ("delay", "released"),
    [(0, TEXT), (1, "First sentence. Second one."), (2, "First sentence."), (3, "")],
)
def test_it_stays_the_configured_sentences_behind_in_delayed_mode(delay, released):
    assert TEXT[: releasable("delayed", delay, "running", TEXT, [], 0)] == released


def test_it_counts_chinese_sentences():
    text = "第一句。第二句！第三"
    assert text[: releasable("delayed", 1, "running", text, [], 0)] == "第一句。第二句！"


def test_it_holds_delivery_at_a_pause_and_never_goes_back():
    assert releasable("delayed", 1, "paused", TEXT, [], 5) == 5
    assert releasable("delayed", 3, "running", TEXT, [], 16) == 16


def test_it_never_releases_a_stop_string_or_what_could_become_one():
    assert TEXT[: releasable("delayed", 0, "running", TEXT, ["Second"], 0)] == "First sentence. "
    assert releasable("delayed", 0, "running", "abc wr", ["write"], 0) == 2


def test_it_refuses_what_caesura_does_not_do():
    base = {"model": "caesura:plain", "messages": [{"role": "user", "content": "Hi"}]}
    for extra, word in [
        ({"n": 2}, "n=2"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"top_logprobs": 21, "logprobs": True}, "20"),
        ({"tool_choice": "required"}, "tools"),
        ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"stream_options": {"include_usage": True}}, "only allowed when stream"),
    ]:
        with pytest.raises(ValidationError, match=word):
            schemas.ChatRequest.model_validate({**base, **extra})
    harmless = {"response_format": {"type": "text"}, "tool_choice": "none", "logit_bias": {}}
    harmless |= {"frequency_penalty": 0, "presence_penalty": 0.0}
    assert schemas.ChatRequest.model_validate({**base, **harmless}).model == "caesura:plain"
    image = {"type": "image_url", "image_url": {"url": "http://x"}}
    with pytest.raises(ValidationError, match="image_url"):
        schemas.ChatRequest.model_validate(
            {**base, "messages": [{"role": "user", "content": [image]}]}
        )


def test_it_reads_a_prefill_and_the_sampling_parameters():
    body = schemas.ChatRequest.model_validate(
        {
            "model": "caesura:plain",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
                },
                {"role": "assistant", "content": "Hello"},
            ],
            "max_completion_tokens": 7,
            "temperature": 0.5,
            "seed": 3,
            "stop": "\n",
            "logprobs": True,
            "top_logprobs": 8,
        }
    )
    call = schemas.chat_call(body)
    assert call.messages is not None and call.messages[0]["role"] == "system"
    assert call.messages[-1] == {"role": "assistant", "content": "Hello"}
    assert call.input_text() == "Hi\nthere" and call.stop == ["\n"] and call.domain_slug == "plain"
    assert call.decoding() == {
        "temperature": 0.5,
        "seed": 3,
        "max_new_tokens": 7,
        "top_alternatives": 8,
    }


def test_it_reads_the_sampling_parameters_of_a_response_request():
    body = schemas.ResponseRequest.model_validate(
        {
            "model": "caesura:plain",
            "input": "Hi",
            "instructions": "Be brief.",
            "max_output_tokens": 9,
            "temperature": 0,
            "seed": 11,
        }
    )
    call = schemas.response_call(body)
    assert call.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert call.decoding() == {"temperature": 0, "seed": 11, "max_new_tokens": 9}


def test_it_takes_a_conversation_without_a_user_message_as_openai_does():
    body = schemas.ChatRequest.model_validate(
        {"model": "caesura:plain", "messages": [{"role": "system", "content": "Summarise: fever."}]}
    )
    call = schemas.chat_call(body)
    assert call.messages == [{"role": "system", "content": "Summarise: fever."}]
    assert call.input_text() == "Summarise: fever."  # what the reviewer reads as the case


def test_it_takes_an_earlier_answers_refusal_part_as_its_text():
    refusal = {"type": "refusal", "refusal": "I cannot say."}
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [refusal]},
        {"role": "user", "content": "Why?"},
    ]
    call = schemas.chat_call(
        schemas.ChatRequest.model_validate({"model": "caesura:plain", "messages": messages})
    )
    assert call.messages[1] == {"role": "assistant", "content": "I cannot say."}


def test_it_takes_a_top_p_of_0_as_the_most_likely_token_alone():
    def decoding(top_p):
        body = schemas.ChatRequest.model_validate(
            {"model": "caesura:plain", "messages": [{"role": "user", "content": "Hi"}],
             "top_p": top_p}
        )  # fmt: skip
        return schemas.chat_call(body).decoding()

    assert decoding(0)["top_p"] == MIN_SCALE  # the engine's nucleus of one token
    assert decoding(0.5)["top_p"] == 0.5 and "top_p" not in decoding(None)
    SamplingParams(**decoding(0))  # the engine takes it
    with pytest.raises(ValidationError):
        decoding(-0.1)


def test_it_takes_a_negative_seed_as_openai_does():
    for seed, engine in ((-1, 2**63 - 1), (-(2**63), 0), (2**63 - 1, 2**63 - 1)):
        body = schemas.ChatRequest.model_validate(
            {"model": "caesura:plain", "messages": [{"role": "user", "content": "Hi"}],
             "seed": seed}
        )  # fmt: skip
        call = schemas.chat_call(body)
        assert call.seed == seed and call.decoding()["seed"] == engine
    for seed in (-(2**63) - 1, 2**63):  # beyond 64 bits: refused, naming the field
        with pytest.raises(ValidationError):
            schemas.ChatRequest.model_validate(
                {"model": "caesura:plain", "messages": [{"role": "user", "content": "Hi"}],
                 "seed": seed}
            )  # fmt: skip


def test_it_keeps_a_record_of_every_kind_of_call_that_postgres_can_store():
    base = {"model": "caesura:plain"}
    calls = [
        schemas.chat_call(
            schemas.ChatRequest.model_validate(
                {**base, "messages": [{"role": "user", "content": "Hi"}]}
            )
        ),
        schemas.completion_call(schemas.CompletionRequest.model_validate({**base, "prompt": "Hi"})),
        schemas.response_call(
            schemas.ResponseRequest.model_validate({**base, "input": "Hi", "background": True})
        ),
    ]
    records = [json.loads(json.dumps(call.record())) for call in calls]
    assert [r["endpoint"] for r in records] == ["chat.completion", "text_completion", "response"]
    assert [r["background"] for r in records] == [False, False, True]


def test_it_sends_a_response_streams_error_as_an_error_event(monkeypatch):
    from reviewer.gateway import streams
    from reviewer.gateway.delivery import End

    async def built(make, session_id, *args):
        return {"status": "cancelled"}

    async def lines() -> list[bytes]:
        events = streams.ResponseEvents(7, -1)
        return [line async for line in events._closing(End("cancelled", "by its application"), 0)]

    monkeypatch.setattr(streams, "built", built)
    [line] = asyncio.run(lines())
    event = json.loads(line.decode().split("data: ", 1)[1])
    assert event["type"] == "error"  # as the SDK's ResponseErrorEvent, not the error's kind
    assert event["code"] == "cancelled" and event["sequence_number"] == 0


def test_it_resumes_a_response_stream_that_timed_out_without_losing_a_character(monkeypatch):
    """A wait that timed out ends one connection while the text may still grow: the short tail
    waits for the next one, and the error event takes no number of its own, so a client that
    resumes after the last number it saw gets every character once, in order."""
    from reviewer.gateway import streams
    from reviewer.gateway.delivery import End, Piece

    text = "".join(chr(ord("a") + i % 26) for i in range(40))

    async def built(make, session_id, *args):
        output = [{"content": [{"text": text}], "status": "completed"}]
        return {"id": "resp_7", "object": "response", "status": "completed", "output": output}

    class Steps:
        sent = 0

        def __init__(self, *steps):
            self._steps = steps

        async def steps(self, start_at=0):
            for step in self._steps:
                yield step

    async def connection(after: int, *steps) -> list[dict]:
        events = streams.ResponseEvents(7, after)
        lines = [line async for line in events.stream(Steps(*steps))]
        return [json.loads(line.decode().split("data: ", 1)[1]) for line in lines]

    def deltas(events: list[dict]) -> str:
        return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")

    monkeypatch.setattr(streams, "built", built)
    for released in (20, 0):  # delayed delivery sent some; after review, nothing yet
        first = asyncio.run(connection(-1, Piece(text[:released], []), End("timeout", "waited")))
        assert first[-1]["type"] == "error"
        assert first[-1]["sequence_number"] == first[-2]["sequence_number"]
        second = asyncio.run(
            connection(first[-1]["sequence_number"], Piece(text, []), End("completed"))
        )
        assert deltas(first) + deltas(second) == text
        assert second[0]["sequence_number"] == first[-1]["sequence_number"] + 1


@pytest.mark.model  # a token's bytes come from the model's tokenizer
def test_it_lists_no_end_of_text_token_in_logprobs():
    """The engine keeps the end-of-turn token it stopped on (no text); OpenAI lists only the
    tokens whose bytes make the text. A token that ends inside a character keeps its place."""
    from reviewer.gateway import answers
    from reviewer.lifecycle.record import Token
    from reviewer.web.tokenizer import tokenizer

    words = tokenizer().encode(" fever.")
    end = tokenizer().convert_tokens_to_ids("<|im_end|>")
    signals = {"probability": 0.5, "alternatives": []}
    tokens = [Token(i, tokenizer().decode([i]), signals) for i in words]
    tokens.append(Token(end, "", signals))
    chat = answers.chat_logprobs(tokens, 0)["content"]
    assert [t["token"] for t in chat] == [t.text for t in tokens[:-1]]
    assert bytes(b for t in chat for b in t["bytes"]).decode() == " fever."
    completion = answers.completion_logprobs(tokens, 0)
    assert "".join(completion["tokens"]) == " fever." and len(completion["text_offset"]) == len(
        words
    )


@pytest.mark.model  # a token's bytes come from the model's tokenizer
def test_it_counts_a_text_completions_offsets_by_the_tokens_not_the_text_sent(monkeypatch):
    """A piece may end inside a token (a stop string held back): the token comes with the next
    piece, and the offsets stay those of the tokens."""
    from reviewer.gateway import streams
    from reviewer.gateway.delivery import End, Piece
    from reviewer.lifecycle.record import Token

    async def built(make, session_id, *args):
        return {"head": {"id": "cmpl-7"}, "usage": {}}

    pieces = [
        Piece("The he", [Token(1, "The")]),  # " heart" only partly released
        Piece("art beats", [Token(2, " heart"), Token(3, " beats")]),
        End("completed"),
    ]

    class Feed:
        follower = SimpleNamespace(finish_reason="length")

        async def steps(self):
            for step in pieces:
                yield step

    async def chunks() -> list[dict]:
        session = SimpleNamespace(
            pk=7, created_at=datetime.now(UTC), domain=SimpleNamespace(slug="x")
        )
        lines = streams.completions(Feed(), session, chat=False, top=0, include_usage=False)
        return [json.loads(line.decode()[6:]) async for line in lines if b"[DONE]" not in line]

    monkeypatch.setattr(streams, "built", built)
    offsets = [o for c in asyncio.run(chunks()) for o in (c["choices"][0]["logprobs"] or {}).get(
        "text_offset", [])]  # fmt: skip
    assert offsets == [0, 3, 9]  # "The", " heart", " beats"; not 6 for " heart"


class Waiting:
    """A follower of a session that has stored nothing yet: every wait runs out."""

    session_id, row, text, tokens, locked = 1, None, "", [], 0

    async def open(self) -> None:
        pass

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)


def test_it_keeps_a_waiting_stream_alive_at_the_configured_interval():
    delivery = Delivery(Waiting(), "after_review", 0, max_wait_s=60, keep_alive_s=0.1)

    async def first_three() -> tuple[list, float]:
        began, steps = time.monotonic(), []
        async for step in delivery.steps():
            steps.append(step)
            if len(steps) == 3:
                return steps, time.monotonic() - began
        raise AssertionError("the delivery ended")

    steps, took = asyncio.run(first_three())
    assert steps == [KeepAlive(), KeepAlive(), KeepAlive()]
    assert 0.28 <= took < 2.0


@override_settings(CAESURA_GATEWAY_KEEPALIVE_S=4)
def test_it_gives_each_call_the_keep_alive_interval_the_settings_name(monkeypatch):
    from reviewer.gateway import views

    monkeypatch.setattr(views, "Follower", lambda session_id: Waiting())
    domain = SimpleNamespace(delivery_mode="delayed", delay_sentences=1, max_wait_s=30)
    session = SimpleNamespace(pk=1, domain=domain, gateway={"stop": ["\n"]})
    delivery = asyncio.run(views.follow(session))
    assert (delivery.keep_alive_s, delivery.stops, delivery.mode) == (4, ["\n"], "delayed")


def test_it_sends_an_answer_sent_whole_only_as_approved(monkeypatch):
    """A call that answers once, at the end, never gathers text a reviewer may still edit: in
    a delayed domain the stream's released sentences are for streams."""
    from reviewer.gateway.progress import Row

    follower = Waiting()
    delivery = Delivery(follower, "delayed", 0, max_wait_s=60, lock=False)
    follower.row = Row("paused", "One. Two. ", 0, "", "")
    follower.text = "One. Two. "
    assert released_now(delivery) is None
    follower.row = Row("completed", "One. Second. ", 0, "", "")
    follower.text = "One. Second. "
    piece = asyncio.run(delivery._release())
    assert piece is not None and piece.text == "One. Second. "


def stale_stream(session_id: int, text: str, released: int = 0) -> Delivery:
    """A stream of a delayed domain that read a releasing token while the session ran: its
    follower has not read what was stored after it."""
    from reviewer.gateway.progress import Follower, Row
    from reviewer.lifecycle.record import Token

    follower = Follower(session_id)
    follower.row = Row("running", "", released, "", "")
    follower.tokens = [Token(i, piece) for i, piece in enumerate(text.split("|"))]
    return Delivery(follower, "delayed", 1, max_wait_s=60)


def released_now(delivery: Delivery):
    """One release step, then the connection its read used is closed (it lives in another
    thread, which the test database's teardown would otherwise find still connected)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    async def step():
        try:
            return await delivery._release()
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(step())


@pytest.mark.django_db(transaction=True)
def test_it_sends_nothing_a_pause_stopped_before_the_stream_locked_it(alice):
    """The worker stores a token that lets a sentence leave, then a pause; a stream that took
    the token before the pause must not send the sentence, as it could not lock it while the
    session ran: at the pause a reviewer may already be changing it. It reads where the session
    stands instead (before, it sent the sentence, which the reviewer could then change)."""
    from reviewer.lifecycle import gateway
    from reviewer.models import ReviewSession
    from tests.session_factory import make_session

    text = "One. |Two. |Thr"
    session = make_session(alice, status=ReviewSession.PAUSED)
    ReviewSession.objects.filter(pk=session.pk).update(text=text.replace("|", ""))
    delivery = stale_stream(session.pk, text)
    assert released_now(delivery) is None
    session.refresh_from_db()
    assert session.released_chars == 0
    assert (delivery.follower.row.status, delivery.sent) == ("paused", 0)
    session.refresh_from_db()
    gateway.require_undelivered(session, 0, "edit")  # the reviewer may change all of it


@pytest.mark.django_db(transaction=True)
def test_it_locks_then_sends_what_leaves_while_the_session_runs(alice):
    from reviewer.lifecycle import review
    from reviewer.models import ReviewSession
    from reviewer.web.arguments import CommandError
    from tests.session_factory import make_session

    text = "One. |Two. |Thr"
    session = make_session(alice, status=ReviewSession.RUNNING)
    ReviewSession.objects.filter(pk=session.pk).update(text=text.replace("|", ""))
    piece = released_now(stale_stream(session.pk, text))
    assert piece is not None and piece.text == "One. Two."  # the sentence being written waits
    session.refresh_from_db()
    assert session.released_chars == len("One. Two.")
    ReviewSession.objects.filter(pk=session.pk).update(status=ReviewSession.PAUSED)
    with pytest.raises(CommandError, match="locked"):
        review.edit(alice, session.pk, 0, 3, "Uno", command_id="edit-2")
    # A second stream of the same session (a resumed one) may send what is locked already.
    again = released_now(stale_stream(session.pk, text, released=len("One. Two.")))
    assert again is not None and again.text == "One. Two."


@pytest.mark.django_db(transaction=True)
def test_it_sends_nothing_whose_session_paused_and_ran_again_since_the_stream_read_it(alice):
    """A pause, an edit and a resume between the stream's read and its lock: the session runs
    again, but the text the stream holds may be the one before the edit. It reads again first."""
    from reviewer import events
    from reviewer.models import ReviewSession
    from tests.session_factory import make_session

    text = "One. |Two. |Thr"
    session = make_session(alice, status=ReviewSession.RUNNING)
    ReviewSession.objects.filter(pk=session.pk).update(text=text.replace("|", ""))
    delivery = stale_stream(session.pk, text)
    for status in ("paused", "running"):  # the edit itself, in between, is the reviewer's
        events.emit(session.pk, events.STATUS, events.status(status))
    assert released_now(delivery) is None
    session.refresh_from_db()
    assert (session.released_chars, delivery.sent, delivery.follower.last_seq) == (0, 0, 2)
    piece = released_now(delivery)  # read up to the edit now: it may go on
    assert piece is not None and piece.text == "One. Two."
