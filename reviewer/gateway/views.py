"""The /v1/ endpoints: thin async views. Each admits the call (key, limits, body), asks
reviewer.lifecycle.gateway to start or change a generation, and answers from its delivery.
Their database work goes through ``off_loop`` (reviewer/gateway/database.py), which gives
the connection back to the web server's pool after each call: a call that waits for its
review holds none.
A client that disconnects loses nothing: the generation goes on without it, and its result
stays at /v1/responses/{id}."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ValidationError

from reviewer.gateway import answers, auth, schemas, streams
from reviewer.gateway.database import off_loop
from reviewer.gateway.delivery import Delivery, End, Piece
from reviewer.gateway.errors import GatewayError, error_body, from_validation
from reviewer.gateway.progress import Follower
from reviewer.lifecycle import gateway
from reviewer.lifecycle.transitions import NotFound
from reviewer.models import Application, Domain, ReviewSession, statuses
from reviewer.web import arguments
from reviewer.web.arguments import CommandError, storable
from webapp.errors import body_limit

log = logging.getLogger(__name__)

Body = TypeVar("Body", bound=BaseModel)
View = Callable[..., Any]  # an async view, as Django routes it


def answering(method: str) -> Callable[[Callable[..., Awaitable[HttpResponseBase]]], View]:
    """One method per endpoint; a refusal of any kind is answered in OpenAI's shape."""

    def wrap(view: Callable[..., Awaitable[HttpResponseBase]]) -> View:
        async def run(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                if request.method != method:
                    refused = GatewayError(405, f"{request.path} answers {method} only").response()
                    refused["Allow"] = method
                    return refused
                application = await auth.admitted(request)
                return await view(request, application, *args, **kwargs)
            except GatewayError as exc:
                return exc.response()
            except CommandError as exc:
                return GatewayError(
                    exc.status,
                    str(exc),
                    param=getattr(exc, "param", None),
                    code=getattr(exc, "code", None),
                    retry_after=getattr(exc, "retry_after", None),
                ).response()

        run.methods = (method,)  # type: ignore[attr-defined]  # for the API description's test
        return csrf_exempt(run)

    return wrap


def parse(request: HttpRequest, schema: type[Body]) -> Body:
    try:
        raw = request.body
    except RequestDataTooBig:
        raise GatewayError(
            413, f"Request body too large: the limit is {body_limit()} bytes"
        ) from None
    try:
        data = arguments.loads(raw or b"null")
    except CommandError as exc:
        raise GatewayError(400, str(exc), code="invalid_json") from None
    if not isinstance(data, dict):
        raise GatewayError(400, "The request body must be a JSON object", code="invalid_json")
    if (where := schemas.unstorable(data)) is not None:
        raise GatewayError(
            400,
            f"Invalid request: {where or 'a key'} holds the NUL character or a lone surrogate,"
            " which cannot be stored",
            param=where or None,
            code="invalid_value",
        )
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def domain_for(application: Application, model: str) -> Domain:
    """The domain a model names among the application's; another tenant's domain is as
    unknown as one that does not exist (one answer for both, so no key can probe for names),
    as OpenAI answers for a model an organisation has no access to."""
    slug = model.removeprefix(schemas.MODEL_PREFIX)
    # A name the database cannot hold (a NUL, a lone surrogate) names no domain either.
    domain = application.domains.filter(slug=slug).first() if storable(slug) else None
    if domain is not None:
        return domain
    raise GatewayError(
        404,
        f"The model {model!r} does not exist or this application may not use it;"
        " GET /v1/models lists yours",
        param="model",
        code="model_not_found",
    )


MAX_IDEMPOTENCY_KEY = 200


def replay_of(request: HttpRequest, body: BaseModel) -> gateway.Replay:
    """What tells this call from a repeat of an earlier one: its endpoint and body (as the
    model read it, so key order and spacing do not matter) and the headers clients send."""
    digest = hashlib.sha256(f"{request.path}\n{body.model_dump_json()}".encode()).hexdigest()
    key = request.headers.get("Idempotency-Key")
    if key is not None and not (0 < len(key) <= MAX_IDEMPOTENCY_KEY and key.isprintable()):
        raise GatewayError(
            400,
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters",
            param="Idempotency-Key",
            code="invalid_value",
        )
    retried = request.headers.get("X-Stainless-Retry-Count", "0").strip() not in ("", "0")
    return gateway.Replay(digest, key, retried)


def start(application: Application, call: schemas.Call, replay: gateway.Replay) -> ReviewSession:
    domain = domain_for(application, call.model)
    prompt: Any = call.messages
    if prompt is None:
        from reviewer.web.tokenizer import tokenizer  # loads a tokenizer: lazily

        prompt = tokenizer().encode(call.prompt or "")
    record = call.record()
    return gateway.start_or_join(
        application,
        replay,
        lambda: gateway.start_generation(
            application, domain, call.input_text(), prompt, call.decoding(), record, replay
        ),
    )


async def follow(session: ReviewSession, lock: bool = True) -> Delivery:
    follower = Follower(session.pk)
    await follower.open()
    domain = session.domain
    return Delivery(
        follower,
        mode=domain.delivery_mode,
        delay_sentences=domain.delay_sentences,
        max_wait_s=domain.max_wait_s,
        stops=list(session.gateway.get("stop") or []),
        lock=lock,
        keep_alive_s=settings.CAESURA_GATEWAY_KEEPALIVE_S,
    )


# How stale a stream's knowledge that its key works may be before it sends text (and, as
# keep-alives go, at most): text never leaves more than this after a revocation.
KEY_CHECK_S = 1.0


def event_stream(
    body: AsyncIterator[bytes],
    delivery: Delivery,
    application: Application,
    answers_call: bool = True,
) -> StreamingHttpResponse:
    """``answers_call``: the stream is the answer of the call that started the generation, so
    its end marks that call answered (a client that drops before the end may retry). A key
    rotated or revoked meanwhile ends the stream, with a 401 error, before it sends more."""

    async def closing() -> AsyncIterator[bytes]:
        checked = time.monotonic()
        try:
            async for chunk in body:
                if time.monotonic() - checked > KEY_CHECK_S:
                    if not await off_loop(auth.still_admitted)(application):
                        yield streams.sse(auth.refusal_now().body())
                        return
                    checked = time.monotonic()
                yield chunk
            if answers_call and delivery.outcome != "timeout":  # else a retry joins it
                await off_loop(gateway.mark_answered)(delivery.follower.session_id)
        except Exception:  # the stream has begun: the client is told in it, never a traceback
            log.exception("gateway stream of session %s failed", delivery.follower.session_id)
            yield streams.sse(error_body(500, "Internal server error"))
        finally:
            await delivery.follower.close()

    answer = StreamingHttpResponse(closing(), content_type="text/event-stream")
    answer["Cache-Control"] = "no-cache"
    answer["X-Accel-Buffering"] = "no"
    return answer


# --- the endpoints -------------------------------------------------------------------------


@answering("GET")
async def models(request: HttpRequest, application: Application) -> HttpResponseBase:
    domains = await off_loop(gateway.domains_of)(application)
    return JsonResponse({"object": "list", "data": [answers.model_entry(d) for d in domains]})


@answering("GET")
async def model(request: HttpRequest, application: Application, model_id: str) -> HttpResponseBase:
    return JsonResponse(answers.model_entry(await off_loop(domain_for)(application, model_id)))


@answering("POST")
async def chat_completions(request: HttpRequest, application: Application) -> HttpResponseBase:
    body = parse(request, schemas.ChatRequest)
    return await generate(application, schemas.chat_call(body), replay_of(request, body), True)


@answering("POST")
async def completions(request: HttpRequest, application: Application) -> HttpResponseBase:
    body = parse(request, schemas.CompletionRequest)
    call = schemas.completion_call(body)
    return await generate(application, call, replay_of(request, body), chat=False)


async def generate(
    application: Application, call: schemas.Call, replay: gateway.Replay, chat: bool
) -> HttpResponseBase:
    session = await off_loop(start)(application, call, replay)
    # Only a stream sends text before the end: only a stream locks what it sent.
    delivery = await follow(session, lock=call.stream)
    top = call.top_logprobs if call.logprobs else None
    if call.stream:
        body = streams.completions(delivery, session, chat, top, call.include_usage)
        return event_stream(body, delivery, application)
    try:
        pieces, end = await collect(delivery)
    finally:
        await delivery.follower.close()
    if not await off_loop(auth.still_admitted)(application):
        raise auth.refusal_now()
    if end.outcome != "timeout":  # a call that waited too long has no answer: a retry joins
        await off_loop(gateway.mark_answered)(session.pk)
    if end.outcome != "completed":
        status, error = streams.end_error(end, session.pk)
        return no_retry(JsonResponse(error, status=status))
    text, tokens = "".join(p.text for p in pieces), [t for p in pieces for t in p.tokens]
    reason = streams.finish_reason(delivery.follower.finish_reason)
    if chat:
        made = await streams.built(answers.chat_completion, session.pk, text, tokens, reason, top)
    else:
        logprobs = answers.completion_logprobs(tokens, top) if top is not None else None
        made = await streams.built(answers.completion, session.pk, text, reason, logprobs)
    return JsonResponse(made)


async def collect(delivery: Delivery) -> tuple[list[Piece], End]:
    pieces: list[Piece] = []
    async for step in delivery.steps():
        if isinstance(step, Piece):
            pieces.append(step)
        elif isinstance(step, End):
            return pieces, step
    return pieces, End("failed", "the delivery ended without an outcome")


def no_retry(answer: JsonResponse) -> JsonResponse:
    """The generation exists and goes on: a client's automatic retry would start another."""
    answer["x-should-retry"] = "false"
    return answer


@answering("POST")
async def create_response(request: HttpRequest, application: Application) -> HttpResponseBase:
    body = parse(request, schemas.ResponseRequest)
    call = schemas.response_call(body)
    session = await off_loop(start)(application, call, replay_of(request, body))
    if call.background and not call.stream:
        await off_loop(gateway.mark_answered)(session.pk)  # its id is the answer
        return JsonResponse(await streams.built(answers.response, session.pk))
    delivery = await follow(session, lock=call.stream)
    if call.stream:
        events = streams.ResponseEvents(session.pk, -1).stream(delivery)
        return event_stream(events, delivery, application)
    try:
        _, end = await collect(delivery)
    finally:
        await delivery.follower.close()
    if not await off_loop(auth.still_admitted)(application):
        raise auth.refusal_now()
    if end.outcome == "timeout":  # no answer yet: a retry of the same call joins it
        status, error = streams.end_error(end, session.pk)
        return no_retry(JsonResponse(error, status=status))
    await off_loop(gateway.mark_answered)(session.pk)
    return JsonResponse(await streams.built(answers.response, session.pk))


def own_session(application: Application, response_id: str) -> ReviewSession:
    """One of the application's generations, by any of its ids (resp_, chatcmpl-, cmpl-)."""
    session_id = answers.session_id_from(response_id)
    try:
        session = gateway.session_of(application, session_id)
    except NotFound:
        raise GatewayError(404, f"No response with id {response_id!r}") from None
    return streams.load(session.pk)


@answering("GET")
async def response(
    request: HttpRequest, application: Application, response_id: str
) -> HttpResponseBase:
    session = await off_loop(own_session)(application, response_id)
    if request.GET.get("stream", "").lower() not in ("true", "1"):
        released = session.text[: session.released_chars]
        made = await streams.built(answers.response, session.pk, None)
        if made["status"] == "in_progress" and released:
            made["output"] = [answers.message_item(session, released, "in_progress")]
        return JsonResponse(made)
    try:
        after = int(request.GET.get("starting_after", "-1"))
    except ValueError:
        raise GatewayError(
            400, "starting_after must be an integer", param="starting_after"
        ) from None
    delivery = await follow(session)
    events = streams.ResponseEvents(session.pk, after).stream(delivery)
    return event_stream(events, delivery, application, answers_call=False)


@answering("POST")
async def cancel_response(
    request: HttpRequest, application: Application, response_id: str
) -> HttpResponseBase:
    session = await off_loop(own_session)(application, response_id)
    await off_loop(gateway.cancel)(application, session.pk)
    await until_ended(session.pk, CANCEL_WAIT_S)
    return JsonResponse(await streams.built(answers.response, session.pk))


CANCEL_WAIT_S = 5.0  # a running generation stops at its next step: answer it cancelled


async def until_ended(session_id: int, timeout: float) -> None:
    """Until the session has ended (a cancel of a running one lands in the worker), or
    ``timeout``: the answer then says ``in_progress``, and the cancel still lands."""
    follower = Follower(session_id)
    await follower.open()
    try:
        deadline = time.monotonic() + timeout
        while follower.status not in statuses.FINAL and time.monotonic() < deadline:
            await follower.wait(deadline - time.monotonic())
    finally:
        await follower.close()


@csrf_exempt  # as every /v1/ route: a POST to an unknown one is told it is unknown
async def not_found(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    return GatewayError(404, f"No endpoint at {request.path}", code="unknown_url").response()
