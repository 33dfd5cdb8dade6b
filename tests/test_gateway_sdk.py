"""The review gateway driven by real clients: the openai SDK and LangChain's ChatOpenAI,
unpatched, against a live server (daphne) and a real worker with the real model.

Persona: "notes" is an application bound to the Plain domain; "other" is another one."""

from __future__ import annotations

import threading
import time
import warnings

import openai
import pytest

from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = [{"role": "user", "content": "Write one sentence about blood pressure."}]


@pytest.fixture
def notes(plain_domain):
    from reviewer.lifecycle import application_keys

    plain_domain.auto_approve_unpaused = True
    plain_domain.save()
    app, key = application_keys.create("notes", [plain_domain], "root", max_concurrent=8)
    return app, key


@pytest.fixture
def client(server_url, celery_worker_process, notes):
    return openai.OpenAI(base_url=server_url + "/v1", api_key=notes[1], max_retries=0)


def session_of(response_id: str):
    from reviewer.models import ReviewSession

    return ReviewSession.objects.get(pk=int(response_id.split("_")[-1].split("-")[-1]))


def test_it_answers_a_chat_completion_with_the_approved_text_and_logprobs(client):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the SDK parses the answer without a warning
        answer = client.chat.completions.create(
            model="caesura:plain",
            messages=PROMPT,
            max_tokens=6,
            temperature=0,
            logprobs=True,
            top_logprobs=3,
        )
    session = session_of(answer.id)
    assert session.status == "completed" and session.application.name == "notes"
    assert answer.choices[0].message.content == session.text
    assert answer.usage.completion_tokens == len(session.generated_ids) <= 6
    engine_said = session.events.get(type="finish").payload["reason"]
    assert answer.choices[0].finish_reason == {"max_tokens": "length"}.get(engine_said, "stop")
    assert answer.system_fingerprint.startswith("fp_")
    content = answer.choices[0].logprobs.content
    assert "".join(t.token for t in content) == session.text
    assert all(t.logprob <= 0 and len(t.top_logprobs) == 3 for t in content)
    extra = answer.model_extra["caesura"]
    assert extra["session_id"] == session.pk and extra["review"]["status"] == "approved"
    trail = list(session.audit.order_by("id").values_list("action", "actor"))
    assert trail == [("start", "app:notes"), ("generated", "engine"), ("approve", "system")]


def test_it_streams_a_chat_completion_and_continues_a_prefill(client):
    messages = [*PROMPT, {"role": "assistant", "content": "High blood pressure"}]
    stream = client.chat.completions.create(
        model="caesura:plain",
        messages=messages,
        max_tokens=5,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    session = session_of(chunks[0].id)
    assert text == session.text and text
    assert session.gateway["messages"][-1]["role"] == "assistant"
    assert chunks[-1].usage.completion_tokens == 5
    # The caesura object rides on the last chunk, the usage one, too.
    assert chunks[-1].model_extra["caesura"]["session_id"] == session.pk


def test_a_stop_string_inside_a_token_leaves_tokens_that_make_up_the_text(client):
    """The stop string begins inside a token: what is left of that token is a token of its
    own, in the logprobs and in the usage, and in the events every reader folds."""
    from reviewer.lifecycle import record

    free = client.completions.create(
        model="caesura:plain", prompt="The heart", max_tokens=8, temperature=0, logprobs=1
    )
    pieces = free.choices[0].logprobs.tokens
    k = next(k for k in range(1, len(pieces)) if len(pieces[k].strip()) >= 3)
    inside = len("".join(pieces[:k])) + 2  # two characters into token k
    stop = free.choices[0].text[inside : inside + 3]
    answer = client.completions.create(
        model="caesura:plain", prompt="The heart", max_tokens=8, temperature=0, stop=[stop],
        logprobs=1,
    )  # fmt: skip
    text, tokens = answer.choices[0].text, answer.choices[0].logprobs.tokens
    assert text == free.choices[0].text[:inside] and answer.choices[0].finish_reason == "stop"
    assert "".join(tokens) == text and answer.usage.completion_tokens == len(tokens) == k + 1
    session = session_of(answer.id)
    log = [{"type": e.type, **e.payload} for e in session.events.order_by("seq")]
    folded = record.fold(log)
    assert [t.token_id for t in folded] == session.generated_ids
    assert record.text_of(folded) == session.text == text


def test_it_ends_at_a_stop_string_without_it(client):
    free = client.completions.create(
        model="caesura:plain", prompt="The heart", max_tokens=8, temperature=0
    )
    stop = free.choices[0].text[3:6]
    assert stop.strip()
    answer = client.completions.create(
        model="caesura:plain", prompt="The heart", max_tokens=8, temperature=0, stop=[stop]
    )
    assert answer.choices[0].text == free.choices[0].text[: free.choices[0].text.index(stop)]
    assert answer.choices[0].finish_reason == "stop"
    assert session_of(answer.id).text == answer.choices[0].text


def test_it_streams_a_text_completions_offsets_from_the_start_of_its_text(client, plain_domain):
    plain_domain.delivery_mode, plain_domain.delay_sentences = "delayed", 0  # text as it comes
    plain_domain.save()
    chunks = list(
        client.completions.create(
            model="caesura:plain",
            prompt="The heart",
            max_tokens=8,
            temperature=0,
            logprobs=2,
            stream=True,
        )
    )
    text, offsets = "", []
    for chunk in chunks:
        choice = chunk.choices[0] if chunk.choices else None
        if choice is not None and choice.logprobs is not None:
            offsets += choice.logprobs.text_offset
            assert "".join(choice.logprobs.tokens) == choice.text
        text += choice.text if choice is not None else ""
    tokens = [
        t
        for c in chunks
        if c.choices and c.choices[0].logprobs
        for t in c.choices[0].logprobs.tokens
    ]
    assert offsets == [len("".join(tokens[:i])) for i in range(len(tokens))]
    assert text == "".join(tokens) and len(tokens) > 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].logprobs) > 1  # several pieces


def test_it_runs_a_background_response_resumable_by_sequence_number(client):
    created = client.responses.create(
        model="caesura:plain",
        input="Name one vital sign, in one word.",
        max_output_tokens=40,  # the model ends first: the response completes
        temperature=0,
        background=True,
    )
    assert created.status in ("queued", "in_progress")
    whole = list(client.responses.retrieve(created.id, stream=True))
    assert whole[-1].type == "response.completed"
    numbers = [e.sequence_number for e in whole]
    assert numbers == list(range(len(numbers)))
    resumed = list(client.responses.retrieve(created.id, stream=True, starting_after=2))
    assert [e.sequence_number for e in resumed] == numbers[3:]
    done = client.responses.retrieve(created.id)
    assert done.status == "completed" and done.output_text == session_of(created.id).text
    # The SDK's stream helper rebuilds the response from the events, even once it ended.
    with client.responses.stream(response_id=created.id) as again:
        assert again.get_final_response().output_text == done.output_text


def test_it_reports_an_approved_response_the_token_limit_cut_short_as_incomplete(client):
    """As OpenAI reports it: status incomplete, reason max_output_tokens, with its text and
    usage; the instructions echoed; and the stream ends with response.incomplete."""
    answer = client.responses.create(
        model="caesura:plain",
        input="Describe the heart in detail.",
        instructions="Answer as a cardiologist.",
        max_output_tokens=3,
        temperature=0,
    )
    session = session_of(answer.id)
    assert session.status == "completed"  # approved: the limit is the application's own
    assert (answer.status, answer.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert answer.output_text == session.text and answer.usage.output_tokens == 3
    assert answer.instructions == "Answer as a cardiologist." and answer.store is True
    assert answer.output[0].status == "incomplete" and answer.completed_at is None
    events = list(client.responses.retrieve(answer.id, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-2].item.content[0].text == session.text


def test_it_gives_each_token_its_own_bytes_in_logprobs(client):
    """A character the model writes in two tokens: each reports its own bytes (OpenAI's
    ``bytes:\\x..`` where they are no text alone), and the bytes join to the text."""
    from reviewer.web.tokenizer import token_bytes

    answer = client.chat.completions.create(
        model="caesura:plain",
        messages=[{"role": "user", "content": "Repeat after me: 保险"}],
        max_tokens=6,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    session = session_of(answer.id)
    content = answer.choices[0].logprobs.content
    assert [bytes(t.bytes) for t in content] == [token_bytes()(i) for i in session.generated_ids]
    # The text, and the start of a character the token limit cut (the text holds none of it).
    joined, text = b"".join(bytes(t.bytes) for t in content), session.text.encode()
    assert joined.startswith(text) and len(joined) - len(text) < 4
    assert any(not is_text(bytes(t.bytes)) for t in content), "a character in pieces"
    for t in content:
        alone = bytes(t.bytes)
        escaped = "bytes:" + "".join(f"\\x{b:02x}" for b in alone)
        assert t.token == (alone.decode() if is_text(alone) else escaped)
        # The drawn token's logprob is the same as its entry among the alternatives.
        same = [a.logprob for a in t.top_logprobs if bytes(a.bytes) == alone]
        assert not same or same[0] == t.logprob


def is_text(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_it_cancels_a_response(client, plain_domain):
    plain_domain.auto_approve_unpaused = False
    plain_domain.save()
    created = client.responses.create(
        model="caesura:plain", input="Count to five.", max_output_tokens=4, background=True
    )
    wait_for(lambda: session_of(created.id).status == "generated", what="the end of generation")
    assert client.responses.retrieve(created.id).model_extra["caesura"]["review"][
        "waiting_for_reviewer"
    ]
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled" and session_of(created.id).status == "cancelled"


def test_it_answers_a_cancel_of_a_running_generation_once_it_stopped(client):
    created = client.responses.create(
        model="caesura:plain", input="Describe the heart.", max_output_tokens=200, background=True
    )
    wait_for(lambda: len(session_of(created.id).text) > 0, what="the first tokens")
    cancelled = client.responses.cancel(created.id)
    session = session_of(created.id)
    assert cancelled.status == "cancelled" and session.status == "cancelled"
    assert len(session.generated_ids) < 200


def test_it_gives_a_waiting_call_nothing_once_its_key_was_revoked(client, notes, plain_domain):
    from reviewer.lifecycle import application_keys, gateway
    from reviewer.models import ReviewSession

    plain_domain.auto_approve_unpaused = False  # the call waits for a reviewer
    plain_domain.save()
    refused: list[int] = []

    def call() -> None:
        try:
            client.chat.completions.create(model="caesura:plain", messages=PROMPT, max_tokens=3)
        except openai.APIStatusError as exc:
            refused.append(exc.status_code)

    waiting = threading.Thread(target=call)
    waiting.start()
    mine = ReviewSession.objects.filter(application=notes[0])
    sid = wait_for(lambda: mine.filter(status="generated").values_list("pk", flat=True).first())
    application_keys.revoke(notes[0], "root")
    gateway.cancel(notes[0], sid)  # the call's generation ends: what would it be told?
    waiting.join(timeout=30)
    assert refused == [401]


def test_it_joins_a_timed_out_calls_automatic_retry_to_its_generation(
    server_url, notes, plain_domain, celery_worker_process
):
    from reviewer.models import ReviewSession

    plain_domain.auto_approve_unpaused = False  # the call waits for a reviewer: it times out
    plain_domain.save()
    impatient = openai.OpenAI(
        base_url=server_url + "/v1", api_key=notes[1], timeout=2.0, max_retries=1
    )
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(model="caesura:plain", messages=PROMPT, max_tokens=3)
    # Two attempts, one generation: the retry followed the first attempt's.
    assert ReviewSession.objects.filter(application=notes[0]).count() == 1


def test_it_answers_one_idempotency_key_from_one_generation(client):
    key = {"Idempotency-Key": "visit-42"}
    asked = {"model": "caesura:plain", "input": "Count to three.", "max_output_tokens": 3}
    first = client.responses.create(**asked, background=True, extra_headers=key)
    again = client.responses.create(**asked, background=True, extra_headers=key)
    assert again.id == first.id
    with pytest.raises(openai.ConflictError, match="another request"):
        client.responses.create(**{**asked, "input": "Count to four."}, extra_headers=key)
    assert client.responses.create(**asked, background=True).id != first.id


def test_it_refuses_each_error_class_in_openais_shape(client, server_url, notes, plain_domain):
    from reviewer.lifecycle import application_keys

    with pytest.raises(openai.BadRequestError, match="n=2"):
        client.chat.completions.create(model="caesura:plain", messages=PROMPT, n=2)
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    with pytest.raises(openai.BadRequestError, match="tools"):
        client.chat.completions.create(model="caesura:plain", messages=PROMPT, tools=[tool])
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="caesura:nothing", messages=PROMPT)
    other, other_key = application_keys.create("other", [plain_domain], "root")
    theirs = openai.OpenAI(base_url=server_url + "/v1", api_key=other_key, max_retries=0)
    created = theirs.responses.create(
        model="caesura:plain", input="Hi", max_output_tokens=2, background=True
    )
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel(created.id)
    new_key = application_keys.rotate(other, "root")
    with pytest.raises(openai.AuthenticationError):
        theirs.models.list()
    application_keys.revoke(other, "root")
    revoked = openai.OpenAI(base_url=server_url + "/v1", api_key=new_key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        revoked.models.list()
    app = notes[0]
    app.requests_per_minute = 1
    app.save()
    with pytest.raises(openai.RateLimitError) as refused:
        for _ in range(2):  # one more than a minute allows, whatever came before
            client.models.list()
    assert int(refused.value.response.headers["Retry-After"]) >= 1


def test_it_sends_nothing_but_keep_alives_before_approval(server_url, client, notes, plain_domain):
    """after_review: while the generation waits for its reviewer, the stream carries no text."""
    import httpx

    from reviewer.lifecycle import review

    plain_domain.auto_approve_unpaused = False
    plain_domain.save()
    received: list[bytes] = []
    body = {"model": "caesura:plain", "messages": PROMPT, "max_tokens": 4, "stream": True}
    headers = {"Authorization": f"Bearer {notes[1]}"}

    def read() -> None:
        with httpx.stream(
            "POST", server_url + "/v1/chat/completions", json=body, headers=headers, timeout=60
        ) as answer:
            for chunk in answer.iter_bytes():
                received.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    from reviewer.models import ReviewSession

    session = wait_for(
        lambda: ReviewSession.objects.filter(status="generated", application=notes[0]).first(),
        what="a generated session",
    )
    time.sleep(1)
    before = b"".join(received).decode()
    assert session.text and streamed_text(before) == ""
    reviewer = plain_domain.reviewers.create(username="rita")
    from reviewer.lifecycle import claims

    claims.claim(reviewer, session.pk)
    review.approve(reviewer, session.pk)
    reader.join(30)
    after = b"".join(received).decode()
    assert after.endswith("data: [DONE]\n\n")
    assert streamed_text(after) == ReviewSession.objects.get(pk=session.pk).text


def streamed_text(sse: str) -> str:
    import json

    datas = [line[6:] for line in sse.splitlines() if line.startswith("data: ")]
    chunks = [json.loads(d) for d in datas if d != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_it_works_with_langchain(server_url, celery_worker_process, notes):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        base_url=server_url + "/v1",
        api_key=notes[1],
        model="caesura:plain",
        max_tokens=4,
        temperature=0,
        max_retries=0,
    )
    from reviewer.models import ReviewSession

    said = llm.invoke("Say hello.")
    assert said.content == ReviewSession.objects.latest("created_at").text
    streamed = "".join(str(part.content) for part in llm.stream("Say hello."))
    assert streamed == said.content
