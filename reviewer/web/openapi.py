"""The OpenAPI 3.1 description of the JSON API and the gateway (/v1/), served at /api/schema
for client authors.

Request bodies and answers are pydantic models (reviewer/web/bodies.py, reviewer/web/replies.py;
the gateway's in reviewer/gateway/), turned into JSON Schema by pydantic, so the limits
described are the ones enforced; a test checks that every API and gateway URL and every
command is described, and that real answers match their models.
"""

from __future__ import annotations

from typing import Any

from reviewer.gateway import openapi as gateway
from reviewer.web import arguments, bodies, replies
from reviewer.web.command_table import COMMANDS

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def model_schemas() -> dict[str, Any]:
    """The request bodies and the answers, and what they refer to, as components."""
    return gateway.model_components([*bodies.MODELS, *replies.MODELS])


def body(model: type[bodies.CommandBody]) -> dict[str, Any]:
    required = any(field.is_required() for field in model.model_fields.values())
    return {"required": required, "content": {JSON: {"schema": ref(model.__name__)}}}


def answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema or {}}}}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": gateway.REF.format(model=name)}


def refusals(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "Bad input: the message names the argument; nothing was changed",
        401: "No or bad credentials",
        403: "CSRF check failed (cookie authentication only)",
        404: "No such session, or not yours",
        405: "Method not allowed",
        409: (
            "The session's state does not allow the command, or its command_id was used for"
            " another command; nothing was changed"
        ),
        413: "Request body too large",
        429: "Too many of the owner's sessions generating at once; nothing was changed (Retry-After)",
        503: "Redis out of reach: the command was refused and changed nothing; retry it",
    }
    return {str(s): answer(reasons[s], ref("Error")) for s in (401, 405, 413, *statuses)}


def query(reader: arguments.Integer) -> dict[str, Any]:
    return {"name": reader.name, "in": "query", "required": False, "schema": reader.schema()}


SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 0},
}


def extra_refusals(name: str) -> tuple[int, ...]:
    """What only some commands answer: 503 where the command sets a flag in Redis (pause,
    resume, cancel), 429 where it may make one more session generate (resume)."""
    return (
        *((503,) if name in ("pause", "resume", "cancel") else ()),
        *((429,) if name == "resume" else ()),
    )


def command_path(name: str) -> dict[str, Any]:
    command = COMMANDS[name]
    return {
        "parameters": [SESSION_ID],
        "post": {
            "operationId": f"{name}_session",
            "summary": command.summary,
            "requestBody": body(command.body),
            "responses": {
                str(command.status): answer(
                    "Done" if command.status == 200 else "Queued for the worker",
                    ref("CommandResult"),
                ),
                **refusals(400, 403, 404, 409, *extra_refusals(name)),
            },
        },
    }


def description() -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/api/sessions": {
            "get": {
                "operationId": "list_sessions",
                "summary": "Your sessions (staff: everyone's), most recently updated first",
                "parameters": [query(arguments.LIMIT)],
                "responses": {
                    "200": answer("The sessions", ref("SessionList")),
                    **refusals(400),
                },
            },
            "post": {
                "operationId": "start_session",
                "summary": "Start a session; a worker begins generating",
                "requestBody": body(bodies.StartBody),
                "responses": {
                    "201": answer("Started", ref("CommandResult")),
                    **refusals(400, 403, 409, 429),
                },
            },
        },
        "/api/sessions/{session_id}": {
            "parameters": [SESSION_ID],
            "get": {
                "operationId": "get_session",
                "summary": "A session with its pauses and edits",
                "parameters": [
                    {
                        "name": "attention",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["1", "true"]},
                        "description": "Include each pause's attention",
                    }
                ],
                "responses": {"200": answer("The session", ref("Session")), **refusals(404)},
            },
        },
        "/api/sessions/{session_id}/events": {
            "parameters": [SESSION_ID],
            "get": {
                "operationId": "session_events",
                "summary": "The session's events after a sequence number",
                "parameters": [query(arguments.AFTER)],
                "responses": {
                    "200": answer("The events, oldest first", ref("Events")),
                    **refusals(400, 404),
                },
            },
        },
        "/api/sessions/{session_id}/redline": {
            "parameters": [SESSION_ID],
            "get": {
                "operationId": "session_redline",
                "summary": "The reviewed text with each change's author, reason and pause",
                "parameters": [
                    {
                        "name": "format",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["html", "docx", "json"]},
                        "description": "html (default), docx (Word tracked changes) or json",
                    }
                ],
                "responses": {
                    "200": {
                        "description": "The redline, in the format asked for",
                        "content": {
                            "text/html": {"schema": {"type": "string"}},
                            DOCX: {"schema": {"type": "string", "format": "binary"}},
                            JSON: {"schema": {"type": "object"}},
                        },
                    },
                    **refusals(400, 404),
                },
            },
        },
        **{f"/api/sessions/{{session_id}}/{name}": command_path(name) for name in COMMANDS},
        "/api/token": {
            "post": {
                "operationId": "issue_token",
                "summary": "Create or rotate your API token (shown once)",
                "responses": {
                    "201": answer("The new key; the old one stops working", ref("IssuedToken")),
                    **refusals(403),
                },
            },
        },
        "/api/schema": {
            "get": {
                "operationId": "api_schema",
                "summary": "This description",
                "security": [],
                "responses": {"200": answer("OpenAPI 3 description")},
            },
        },
        **gateway.paths(),
    }
    schemas = model_schemas()
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Caesura API",
            "version": "1",
            "description": (
                'Errors are {"error": message, "code"?}. Integer fields take JSON integers only;'
                " NaN, Infinity and numbers beyond a float are refused. The session's"
                " websocket (/ws/sessions/{id}/) takes the same commands as"
                ' {"command": name, "command_id": ..., ...arguments}, plus'
                ' {"command": "sync", "after": seq}. The OpenAI-compatible gateway'
                " (/v1/, tag gateway) answers errors in OpenAI's shape and takes an"
                " application's key as a Bearer token."
            ),
        },
        "security": [{"token": []}, {"cookie": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "token": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "'Token <key>', from POST /api/token",
                },
                "cookie": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "sessionid",
                    "description": "A logged-in browser; unsafe methods need X-CSRFToken",
                },
                "application": gateway.SECURITY_SCHEME,
            },
            "schemas": {**schemas, **gateway.components()},
        },
    }
