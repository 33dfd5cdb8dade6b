"""The /v1/ paths of the OpenAPI description served at /api/schema. The request bodies are
the gateway's own pydantic models (reviewer/gateway/schemas.py), turned into JSON Schema by
pydantic, so the description says what the gateway enforces; the answers follow the openai
SDK's types and are only named here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from reviewer.gateway import schemas

JSON = "application/json"
SSE = "text/event-stream"
REF = "#/components/schemas/{model}"
VALIDATION: Literal["validation"] = "validation"  # the schema of what a request may hold

# The generating endpoints: path, operation id, request model, what it does.
GENERATING: tuple[tuple[str, str, type[BaseModel], str], ...] = (
    (
        "/v1/chat/completions",
        "create_chat_completion",
        schemas.ChatRequest,
        "A chat completion, reviewed; streamed as SSE chunks with stream: true",
    ),
    (
        "/v1/completions",
        "create_completion",
        schemas.CompletionRequest,
        "A text completion of a raw prompt (no chat template), reviewed",
    ),
    (
        "/v1/responses",
        "create_response",
        schemas.ResponseRequest,
        "A response; with background: true it returns at once (queued or in_progress)",
    ),
)

OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "description": "OpenAI's error shape; never HTML, never a traceback",
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string", "description": "What was wrong, for a person"},
                "type": {"type": "string", "description": "e.g. invalid_request_error"},
                "param": {"type": ["string", "null"], "description": "The parameter at fault"},
                "code": {"type": ["string", "null"], "description": "e.g. model_not_found"},
            },
        }
    },
}

REASONS = {
    400: "Bad body: the message and param name what is wrong; nothing was started",
    401: "A missing, unknown, rotated or revoked application key",
    404: "An unknown model, URL or id (another tenant's domains and another application's ids"
    " are unknown too)",
    405: "A method the endpoint does not take",
    409: "An action the generation's state does not allow",
    413: "Request body too large",
    422: "Rejected by its reviewer (with the comment), or cancelled",
    429: "Over the application's requests per minute or generations at once; see Retry-After",
    503: "The request counter (Redis) is out of reach; nothing was started",
    504: "Still waiting for review after the domain's max_wait_s; the generation goes on",
}


def path_string(name: str, max_length: int, description: str) -> dict[str, Any]:
    """A string taken from the URL's path."""
    schema = {"type": "string", "maxLength": max_length}
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema,
        "description": description,
    }


MODEL_ID = path_string("model_id", 200, "caesura:<domain slug>")
RESPONSE_ID = path_string(
    "response_id", 100, "resp_N (or chatcmpl-N, cmpl-N: one generation, one number)"
)


def model_components(models: Sequence[type[BaseModel]]) -> dict[str, Any]:
    """Models and what they refer to, as components (the /api/ description's too)."""
    _, top = models_json_schema([(model, VALIDATION) for model in models], ref_template=REF)
    components = dict(top.get("$defs", {}))
    for schema in components.values():
        for field in schema.get("properties", {}).values():
            hoist_description(field)
    return components


def hoist_description(field: dict[str, Any]) -> None:
    """An optional field's description onto the field itself: pydantic leaves it on the
    non-null branch of ``anyOf``, where documentation tools do not show it."""
    described = [branch for branch in field.get("anyOf", ()) if "description" in branch]
    if len(described) == 1 and "description" not in field:
        field["description"] = described[0].pop("description")


def request_schemas() -> dict[str, Any]:
    """Every request model and what it refers to, as components."""
    return model_components([model for _, _, model, _ in GENERATING])


def components() -> dict[str, Any]:
    return {**request_schemas(), "OpenAIError": OPENAI_ERROR}


def answer(description: str, *kinds: str) -> dict[str, Any]:
    shapes = {JSON: {"type": "object"}, SSE: {"type": "string"}}
    return {"description": description, "content": {k: {"schema": shapes[k]} for k in kinds}}


def refusals(*statuses: int) -> dict[str, Any]:
    error = {JSON: {"schema": {"$ref": REF.format(model="OpenAIError")}}}
    shown = sorted({401, 404, 405, 429, 503, *statuses})
    return {str(s): {"description": REASONS[s], "content": error} for s in shown}


def operation(operation_id: str, summary: str, **parts: Any) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "tags": ["gateway"],
        "security": [{"application": []}],
        **parts,
    }


def generating_path(operation_id: str, model: type[BaseModel], summary: str) -> dict[str, Any]:
    body = {
        "required": True,
        "content": {JSON: {"schema": {"$ref": REF.format(model=model.__name__)}}},
    }
    done = answer("The reviewed answer, or (stream: true) its SSE events", JSON, SSE)
    return {
        "post": operation(
            operation_id,
            summary,
            requestBody=body,
            responses={"200": done, **refusals(400, 413, 422, 504)},
        )
    }


def paths() -> dict[str, Any]:
    return {
        "/v1/models": {
            "get": operation(
                "list_models",
                "One model per domain this application may use (caesura:<domain slug>)",
                responses={"200": answer("The models, as OpenAI lists them", JSON), **refusals()},
            )
        },
        "/v1/models/{model_id}": {
            "parameters": [MODEL_ID],
            "get": operation(
                "retrieve_model",
                "One model this application may use",
                responses={
                    "200": answer("The model, as OpenAI shows one", JSON),
                    **refusals(),
                },
            ),
        },
        **{path: generating_path(op, model, summary) for path, op, model, summary in GENERATING},
        "/v1/responses/{response_id}": {
            "parameters": [RESPONSE_ID],
            "get": operation(
                "retrieve_response",
                "The generation's state with caesura.review; or its events again",
                parameters=[
                    {
                        "name": "stream",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["true", "1", "false"]},
                        "description": "true: the event stream (SSE)",
                    },
                    {
                        "name": "starting_after",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": -1},
                        "description": "Resume the stream after this sequence_number",
                    },
                ],
                responses={"200": answer("The response object", JSON, SSE), **refusals(400)},
            ),
        },
        "/v1/responses/{response_id}/cancel": {
            "parameters": [RESPONSE_ID],
            "post": operation(
                "cancel_response",
                "Stop the generation where it is",
                responses={"200": answer("The cancelled response", JSON), **refusals(409)},
            ),
        },
    }


SECURITY_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "An application's key (cae_...), created by an administrator",
}
