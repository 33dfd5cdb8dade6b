"""What the gateway refuses, and how, without a worker: a domain the application is not bound
to (404, as an unknown one), a body too large (413), an unknown /v1/ URL (404) or a method an endpoint does not
take (405), each in OpenAI's error shape and changing nothing; and, on the reviewer's side,
an edit or rollback into text already delivered (409, saying why).

Personas: the "drafter" application is bound to clinical notes, not to contracts; alice reviews
clinical notes."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

from reviewer.lifecycle import application_keys, claims
from reviewer.models import Edit
from reviewer.models import ReviewSession as S
from reviewer.web import tokenizer as web_tokenizer
from reviewer.web.auth import issue_token
from tests.db_snapshot import snapshot
from tests.floor_factory import contracts
from tests.session_factory import TEXT, clinical_notes, make_session, stub_worker

pytestmark = pytest.mark.django_db

CHAT = {"model": "caesura:clinical-notes", "messages": [{"role": "user", "content": "Hi"}]}
PIECES = {11: "The", 12: " patient", 13: " has", 14: " a", 15: " fever."}  # TEXT, by token


class PieceTokenizer:
    """The session factory's five tokens, without the model's tokenizer."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(PIECES[i] for i in ids)


def test_it_refuses_a_conversation_the_models_template_refuses_with_400(drafter, monkeypatch):
    from tests.inference.test_prompt import USER_FIRST
    from tests.inference.tiny import tiny_tokenizer

    strict = tiny_tokenizer()
    strict.chat_template = USER_FIRST  # a model whose template wants a user turn first
    monkeypatch.setattr(web_tokenizer, "tokenizer", lambda: strict)
    before = snapshot()
    system_only = CHAT | {"messages": [{"role": "system", "content": "Summarise: fever."}]}
    error = openai_error(post(drafter[1], "/v1/chat/completions", system_only), 400)
    assert error["param"] == "messages" and "A user turn comes first" in error["message"]
    assert snapshot() == before


@pytest.fixture
def drafter(monkeypatch):
    stub_worker(monkeypatch)
    contracts()
    app, key = application_keys.create("drafter", [clinical_notes()], "root")
    return app, Client(headers={"Authorization": f"Bearer {key}"})


def openai_error(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert list(body) == ["error"] and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def post(client: Client, path: str, body: dict | str):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, data, content_type="application/json")


def test_it_refuses_another_tenants_domain_exactly_as_an_unknown_one(drafter):
    before = snapshot()
    other = openai_error(
        post(drafter[1], "/v1/chat/completions", CHAT | {"model": "caesura:contracts"}), 404
    )
    assert other["code"] == "model_not_found" and other["param"] == "model"
    assert "caesura:contracts" in other["message"] and other["type"] == "not_found_error"
    unknown = openai_error(
        post(drafter[1], "/v1/chat/completions", CHAT | {"model": "caesura:nowhere"}), 404
    )
    assert "GET /v1/models" in unknown["message"]
    # Nothing tells a domain that exists from one that does not: no key can probe for names.
    assert other["message"].replace("contracts", "nowhere") == unknown["message"]
    assert snapshot() == before


def test_it_refuses_a_body_too_large_with_413(drafter):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    huge = json.dumps(CHAT | {"user": "x" * (limit + 1)})
    before = snapshot()
    for path in ("/v1/chat/completions", "/v1/responses"):
        error = openai_error(post(drafter[1], path, huge), 413)
        assert str(limit) in error["message"] and error["type"] == "invalid_request_error"
    assert snapshot() == before and not S.objects.exists()


def test_it_refuses_a_key_given_twice_in_openais_shape(drafter):
    before = snapshot()
    body = '{"model": "caesura:clinical-notes", "messages": [], "model": "caesura:contracts"}'
    error = openai_error(post(drafter[1], "/v1/chat/completions", body), 400)
    assert error["code"] == "invalid_json" and "the key 'model' appears twice" in error["message"]
    assert snapshot() == before


def test_it_answers_unknown_urls_and_wrong_methods_in_openais_shape(drafter):
    client = drafter[1]
    for path in ("/v1/embeddings", "/v1/", "/v1/responses/resp_1/extra"):
        assert openai_error(client.get(path), 404)["code"] == "unknown_url"
        assert openai_error(Client().post(path), 404)["type"] == "not_found_error"
    for method, path in [
        ("get", "/v1/chat/completions"),
        ("delete", "/v1/models"),
        ("put", "/v1/responses"),
        ("get", "/v1/responses/resp_1/cancel"),
    ]:
        response = getattr(client, method)(path)
        assert "only" in openai_error(response, 405)["message"]
        assert response["Allow"] in ("GET", "POST")


def test_it_answers_an_unknown_url_with_404_even_where_csrf_is_checked(drafter):
    strict = Client(enforce_csrf_checks=True, headers=drafter[1].defaults)
    for path in ("/v1/embeddings", "/v1/chat/completions/"):
        assert openai_error(post(strict, path, CHAT), 404)["code"] == "unknown_url"


def test_it_answers_one_model_by_its_id(drafter):
    entry = drafter[1].get("/v1/models/caesura:clinical-notes").json()
    assert entry["id"] == "caesura:clinical-notes" and entry["object"] == "model"
    # The domain by its slug, as every answer's caesura object names it; and its name.
    assert entry["caesura"]["domain"] == "clinical-notes"
    assert entry["caesura"]["domain_name"] == clinical_notes().name
    # Nothing leaves before review there: no sentence delay to speak of.
    assert entry["caesura"]["delivery_mode"] == "after_review"
    assert entry["caesura"]["delay_sentences"] is None
    other = openai_error(drafter[1].get("/v1/models/caesura:contracts"), 404)
    unknown = openai_error(drafter[1].get("/v1/models/caesura:nowhere"), 404)
    assert other["code"] == unknown["code"] == "model_not_found"
    assert other["message"].replace("contracts", "nowhere") == unknown["message"]
    # A name the database cannot hold is as unknown, never a server error.
    for odd in ("caesura:%00", "%00", "caesura:%ED%A0%80"):
        assert openai_error(drafter[1].get(f"/v1/models/{odd}"), 404)["code"] == "model_not_found"


@pytest.mark.model  # the prompt is counted with the model's tokenizer
def test_it_names_a_prompt_over_the_context_as_openai_does(drafter, monkeypatch):
    before = snapshot()
    too_long = CHAT | {"max_tokens": 10**6}
    error = openai_error(post(drafter[1], "/v1/chat/completions", too_long), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "max_tokens")
    # A response calls its limit max_output_tokens, and is told so.
    too_long = RESPONSE | {"max_output_tokens": 10**6}
    error = openai_error(post(drafter[1], "/v1/responses", too_long), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "max_output_tokens")
    assert "max_output_tokens" in error["message"]
    # As the call named it; where it named none, the domain's limit and the prompt are told.
    too_long = CHAT | {"max_completion_tokens": 10**6}
    error = openai_error(post(drafter[1], "/v1/chat/completions", too_long), 400)
    assert error["param"] == "max_completion_tokens" and "max_completion_tokens" in error["message"]
    monkeypatch.setattr(web_tokenizer, "context_length", lambda: 20)  # a model of 20 tokens
    error = openai_error(post(drafter[1], "/v1/chat/completions", CHAT), 400)
    assert error["param"] == "messages" and "the domain's token limit" in error["message"]
    assert snapshot() == before


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"n": 2}, "n", "n=2 is not supported"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4 stop strings"),
        ({"top_logprobs": 3}, "top_logprobs", "needs logprobs"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages.0.content",
            'parts of type "image_url" are not supported: Caesura reviews text only',
        ),
        ({"response_format": {"type": "json_object"}}, "response_format", "not supported"),
        ({"tool_choice": "required"}, "tool_choice", "none or auto"),
        # No case for a reviewer to read: refused, not queued empty.
        (
            {"messages": [{"role": "user", "content": None}]},
            "messages.0.content",
            "only an assistant's message may have none",
        ),
        (
            {"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": " "}]},
            "messages",
            "holds no text",
        ),
        ({"max_tokens": 10**23}, "max_tokens", "max_tokens"),
        # Values of another type are refused, as OpenAI does, never converted.
        ({"max_tokens": True}, "max_tokens", "valid integer"),
        ({"temperature": "0.5"}, "temperature", "valid number"),
        ({"seed": "12"}, "seed", "valid integer"),
        ({"stream": "yes"}, "stream", "valid boolean"),
        ({"logprobs": "true"}, "logprobs", "valid boolean"),
        # Output it would not give is refused, not ignored.
        ({"modalities": ["text", "audio"], "audio": {"voice": "alloy"}}, "audio", "text only"),
        ({"modalities": ["audio"]}, "modalities", "text only"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction", "not supported"),
        ({"web_search_options": {}}, "web_search_options", "not supported"),
    ],
)
def test_it_names_the_parameter_it_refuses_and_says_why(drafter, extra, param, words):
    before = snapshot()
    error = openai_error(post(drafter[1], "/v1/chat/completions", CHAT | extra), 400)
    assert error["param"] == param and words in error["message"]
    assert snapshot() == before


TEXT_CALL = {"model": "caesura:clinical-notes", "prompt": "The patient"}
RESPONSE = {"model": "caesura:clinical-notes", "input": "Summarise: fever."}


@pytest.mark.parametrize(
    ("path", "body", "param", "words"),
    [
        # A text completion reads one non-empty text: nothing else turns into a chat prompt.
        ("/v1/completions", TEXT_CALL | {"prompt": [""]}, "prompt", "must not be empty"),
        ("/v1/completions", TEXT_CALL | {"prompt": [1, 2]}, "prompt", "token ids are not"),
        ("/v1/completions", TEXT_CALL | {"prompt": []}, "prompt", "at least 1 item"),
        ("/v1/completions", TEXT_CALL | {"suffix": "end"}, "suffix", "suffix is not supported"),
        ("/v1/completions", TEXT_CALL | {"best_of": 2}, "best_of", "best_of other than 1"),
        # What would change a response's text is refused, never ignored.
        (
            "/v1/responses",
            RESPONSE | {"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
            "text.format",
            "does not constrain the text",
        ),
        (
            "/v1/responses",
            RESPONSE | {"previous_response_id": "resp_1"},
            "previous_response_id",
            "send the whole conversation",
        ),
        ("/v1/responses", RESPONSE | {"conversation": "conv_1"}, "conversation", "no conversation"),
        ("/v1/responses", RESPONSE | {"top_logprobs": 2}, "top_logprobs", "/v1/chat/completions"),
        (
            "/v1/responses",
            RESPONSE | {"include": ["message.output_text.logprobs"]},
            "include",
            "/v1/chat/completions",
        ),
        ("/v1/completions", TEXT_CALL | {"logprobs": True}, "logprobs", "valid integer"),
        (
            "/v1/responses",
            RESPONSE | {"input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]},
            "input",
            'items of type "function_call_output" are not supported',
        ),
        (
            "/v1/responses",
            RESPONSE
            | {"input": [{"role": "user", "content": [{"type": "input_text", "text": ""}]}]},
            "input",
            "holds no text",
        ),
        (
            "/v1/responses",
            RESPONSE | {"input": [{"role": "robot", "content": "Hi"}]},
            "input.0.role",
            "Input should be",
        ),
    ],
)
def test_it_refuses_what_it_would_otherwise_ignore_naming_the_parameter(
    drafter, path, body, param, words
):
    before = snapshot()
    error = openai_error(post(drafter[1], path, body), 400)
    assert (error["param"], error["code"]) == (param, "invalid_value"), error
    assert words in error["message"] and ".str" not in error["message"]
    assert snapshot() == before


def test_it_refuses_badly_formed_attention_markup_in_a_message_with_400(drafter, monkeypatch):
    """A message's <ANCHOR:...> and <RECALL> are the engine's markup (docs/gateway.md): a
    stray closing marker is the caller's mistake to be told of, not a server error."""
    from tests.inference.tiny import tiny_tokenizer

    monkeypatch.setattr(web_tokenizer, "tokenizer", tiny_tokenizer)
    before = snapshot()
    for content in ("Explain what </ANCHOR> means in XML.", "<ANCHOR:a>never closed"):
        stray = CHAT | {"messages": [{"role": "user", "content": content}]}
        error = openai_error(post(drafter[1], "/v1/chat/completions", stray), 400)
        assert error["param"] == "messages" and "attention markup" in error["message"]
    assert snapshot() == before


def test_it_names_an_unknown_response_by_the_id_it_was_asked_for(drafter):
    for path in ("/v1/responses/resp_999999", "/v1/responses/nonsense"):
        error = openai_error(drafter[1].get(path), 404)
        assert repr(path.rsplit("/", 1)[1]) in error["message"]
    error = openai_error(post(drafter[1], "/v1/responses/resp_999999/cancel", {}), 404)
    assert "'resp_999999'" in error["message"]
    # Digits Python reads as digits but not as a number ("²", Arabic-Indic), and more of them
    # than a database key holds, name no response either.
    for name in ("resp_\u00b2", "chatcmpl-\u0663", "resp_" + "9" * 19):
        assert repr(name) in openai_error(drafter[1].get(f"/v1/responses/{name}"), 404)["message"]
        cancel = post(drafter[1], f"/v1/responses/{name}/cancel", {})
        assert repr(name) in openai_error(cancel, 404)["message"]
    # /v1 itself is a /v1/ route like any other: JSON, not a redirect page.
    assert openai_error(drafter[1].get("/v1"), 404)["code"] == "unknown_url"


@pytest.fixture
def delivered(alice, monkeypatch):
    """A paused gateway session whose first two words ("The patient") were delivered; alice
    holds its claim."""
    monkeypatch.setattr(web_tokenizer, "tokenizer", PieceTokenizer)
    clinical_notes().reviewers.add(alice)
    app, _ = application_keys.create("drafter", [clinical_notes()], "root")
    session = make_session(None, application=app, released_chars=len("The patient"))
    claims.claim(alice, session.pk)
    return session


@pytest.mark.parametrize(
    ("command", "body"),
    [
        ("edit", {"start": 4, "end": 11, "text": "client"}),
        ("edit", {"start": 10, "end": 15, "text": "ent is"}),
        ("rollback", {"position": 1}),
    ],
)
def test_it_refuses_a_change_to_delivered_text_with_409_saying_why(
    delivered, alice, monkeypatch, command, body
):
    stub_worker(monkeypatch)
    client = Client(headers={"Authorization": f"Token {issue_token(alice)}"})
    before = snapshot()
    response = post(client, f"/api/sessions/{delivered.pk}/{command}", body)
    assert response.status_code == 409
    message = response.json()["error"]
    assert "already released to the application" in message and "locked" in message
    assert f"after character {len('The patient')}" in message
    assert snapshot() == before


def test_it_takes_a_choice_for_the_next_token_when_all_before_it_was_delivered(
    delivered, alice, monkeypatch
):
    """The alternatives at a pause are for the token that comes next: choosing one changes
    nothing delivered."""
    stub_worker(monkeypatch)
    S.objects.filter(pk=delivered.pk).update(released_chars=len(TEXT))
    client = Client(headers={"Authorization": f"Token {issue_token(alice)}"})
    response = post(client, f"/api/sessions/{delivered.pk}/choose", {"token_id": 42})
    assert response.status_code == 202, response.content
    assert Edit.objects.get(session=delivered).start == len(delivered.generated_ids)


def test_it_still_takes_a_change_after_the_delivered_text(delivered, alice, monkeypatch):
    stub_worker(monkeypatch)
    client = Client(headers={"Authorization": f"Token {issue_token(alice)}"})
    edit = post(
        client, f"/api/sessions/{delivered.pk}/edit", {"start": 12, "end": 15, "text": "had"}
    )
    assert edit.status_code == 202, edit.content
    assert Edit.objects.get(session=delivered).text_after == "had"


def test_it_never_tells_the_application_the_words_a_policy_stopped_on(monkeypatch):
    """A pattern policy's reason quotes the text it matched: unreviewed text, maybe the very
    words the reviewer removes. The application learns which policy paused, not the words."""
    from reviewer.gateway import answers
    from reviewer.models import PauseEvent

    monkeypatch.setattr(web_tokenizer, "tokenizer", PieceTokenizer)
    app, _ = application_keys.create("drafter", [clinical_notes()], "root")
    session = make_session(None, application=app)
    PauseEvent.objects.filter(session=session).update(
        trigger="Patient name",
        kind="regex",
        reason='Pattern /[A-Z][a-z]+ Smith/ matched "John Smith"',
    )
    told = json.dumps(answers.caesura_info(session))
    assert "John Smith" not in told and "[A-Z]" not in told
    review = answers.caesura_info(session)["review"]
    assert review["pause_reason"] == "paused by the policy 'Patient name' (regex)"


@pytest.mark.model  # the prompt is counted with the model's tokenizer
def test_it_lets_a_timed_out_call_be_joined_by_its_retry(drafter):
    """A call that waited longer than the domain lets it was given no answer: the same call
    again follows the same generation instead of putting a second one in the queue."""
    domain = clinical_notes()
    domain.max_wait_s = 0
    domain.save()
    client = drafter[1]
    for retry in ("0", "1"):  # the openai SDK's header: its automatic retry of the call
        answer = client.post(
            "/v1/chat/completions",
            json.dumps(CHAT),
            content_type="application/json",
            headers={"X-Stainless-Retry-Count": retry},
        )
        assert openai_error(answer, 504)["code"] == "review_timeout"
    [session] = S.objects.filter(application=drafter[0])
    assert session.answered_at is None
