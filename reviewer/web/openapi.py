"""The OpenAPI 3.1 description of the JSON API and the gateway (/v1/), served at /api/schema
for client authors.

Request bodies and parameters come from the argument readers (reviewer/web/arguments.py) and
the commands table (reviewer/web/command_table.py), the gateway's from its pydantic models
(reviewer/gateway/openapi.py), so the limits described are the ones enforced; a test checks
that every API and gateway URL and every command is described.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from inference.config import MAX_SCALE, MIN_SCALE, SamplingParams
from reviewer.gateway import openapi as gateway
from reviewer.lifecycle import gate
from reviewer.models import statuses
from reviewer.web import arguments
from reviewer.web.command_table import COMMANDS, Reader

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

SESSION_SUMMARY = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "status": {"type": "string", "enum": list(statuses.STATUSES)},
        "domain": {"type": "string"},
        "owner": {
            "type": ["string", "null"],
            "description": "Who started it; null for a gateway generation",
        },
        "reviewer": {
            "type": ["string", "null"],
            "description": "The owner, or the reviewer who claimed it",
        },
        "application": {
            "type": ["string", "null"],
            "description": "The application that sent it through the gateway",
        },
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
    },
}

SESSION = {
    "allOf": [
        {"$ref": "#/components/schemas/SessionSummary"},
        {
            "type": "object",
            "properties": {
                "input": {"type": "string"},
                "model": {"type": "string"},
                "seed": {"type": "integer"},
                "max_new_tokens": {"type": "integer"},
                "decoding": {"$ref": "#/components/schemas/Decoding"},
                "pause_budget": {
                    "type": "object",
                    "description": "The domain's pause budget when the session started",
                    "properties": {
                        "per_100_tokens": {"type": "integer"},
                        "min_distance": {"type": "integer"},
                        "hold_until_first_word": {"type": "boolean"},
                    },
                },
                "muted_policies": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Policies the reviewer muted for this session",
                },
                "task_type": {"type": "string"},
                "task_source": {"type": "string"},
                "task_correction": {
                    "type": ["object", "null"],
                    "description": "A reviewer's word on the task type (correct_task), if any",
                    "properties": {
                        "given": {"type": "string"},
                        "corrected": {"type": "string"},
                        "corrected_by": {"type": "string"},
                        "at": {"type": "string", "format": "date-time"},
                    },
                },
                "text": {"type": "string"},
                "token_ids": {"type": "array", "items": {"type": "integer"}},
                "ids_seq": {"type": "integer"},
                "last_seq": {"type": "integer"},
                "error": {"type": "string"},
                "decision_comment": {"type": "string"},
                "finished_at": {"type": ["string", "null"], "format": "date-time"},
                "pauses": {"type": "array", "items": {"type": "object"}},
                "edits": {"type": "array", "items": {"type": "object"}},
            },
        },
    ]
}

COMMAND_RESULT = {
    "type": "object",
    "required": ["id", "status"],
    "properties": {
        "id": {"type": "integer"},
        "status": {"type": "string"},
        "edit": {"type": "integer", "description": "The queued edit, for edit/choose/rollback"},
        "muted_policies": {
            "type": "array",
            "items": {"type": "string"},
            "description": "For mute/unmute: every policy muted now",
        },
        "repeated": {
            "type": "boolean",
            "description": "The command id was seen before: this is the first result",
        },
    },
}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "What was wrong, for a person"}},
}

DECODING_RANGES = {  # as SamplingParams checks them
    "temperature": (0, MAX_SCALE, f"0 is greedy; otherwise at least {MIN_SCALE}"),
    "top_k": (0, None, "0 turns it off"),
    "top_p": (MIN_SCALE, 1, "1 turns it off"),
    "repetition_penalty": (MIN_SCALE, MAX_SCALE, "1 turns it off"),
    "seed": (0, arguments.MAX_BIGINT, "the top-level seed wins"),
    "max_new_tokens": (1, arguments.MAX_INT, "the top-level max_new_tokens wins"),
    "top_alternatives": (1, 50, "alternatives reported per token"),
}


def decoding_schema() -> dict[str, Any]:
    """Sampling parameters as SamplingParams takes them: JSON integers for its int fields,
    finite numbers for its float fields, nothing else."""
    properties = {}
    for field in fields(SamplingParams):
        if field.name == "attention":
            properties["attention"] = gate.schema()
            continue
        low, high, hint = DECODING_RANGES.get(field.name, (None, None, ""))
        schema: dict[str, Any] = {"type": "integer" if field.type in ("int", int) else "number"}
        schema.update({"minimum": low} if low is not None else {})
        schema.update({"maximum": high} if high is not None else {})
        properties[field.name] = {**schema, "description": hint}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "description": "Overrides of the domain's and the task type's decoding",
    }


def body(required: tuple[Reader, ...] = (), optional: tuple[Reader, ...] = ()) -> dict[str, Any]:
    readers = (*required, *optional, arguments.COMMAND_ID)
    schema = {
        "type": "object",
        "description": "Other keys are ignored; null counts as absent",
        "properties": {reader.name: reader.schema() for reader in readers},
    }
    if required:
        schema["required"] = [reader.name for reader in required]
    return {"required": bool(required), "content": {JSON: {"schema": schema}}}


def start_body() -> dict[str, Any]:
    request = body(
        required=(arguments.DOMAIN, arguments.INPUT),
        optional=(arguments.SEED, arguments.MAX_NEW_TOKENS, arguments.TASK_TYPE),
    )
    request["content"][JSON]["schema"]["properties"]["decoding"] = {
        "$ref": "#/components/schemas/Decoding"
    }
    return request


def answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema or {}}}}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def refusals(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "Bad input: the message names the argument; nothing was changed",
        401: "No or bad credentials",
        403: "CSRF check failed (cookie authentication only)",
        404: "No such session, or not yours",
        405: "Method not allowed",
        409: "The session's state does not allow the command; nothing was changed",
        413: "Request body too large",
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


def command_path(name: str) -> dict[str, Any]:
    command = COMMANDS[name]
    return {
        "parameters": [SESSION_ID],
        "post": {
            "operationId": f"{name}_session",
            "summary": command.summary,
            "requestBody": body(command.required, command.optional),
            "responses": {
                str(command.status): answer(
                    "Done" if command.status == 200 else "Queued for the worker",
                    ref("CommandResult"),
                ),
                **refusals(400, 403, 404, 409, 503),
            },
        },
    }


def description() -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/api/sessions": {
            "get": {
                "operationId": "list_sessions",
                "summary": "Your sessions (staff: everyone's), newest first",
                "parameters": [query(arguments.LIMIT)],
                "responses": {
                    "200": answer(
                        "The sessions",
                        {
                            "type": "object",
                            "properties": {
                                "sessions": {"type": "array", "items": ref("SessionSummary")}
                            },
                        },
                    ),
                    **refusals(400),
                },
            },
            "post": {
                "operationId": "start_session",
                "summary": "Start a session; a worker begins generating",
                "requestBody": start_body(),
                "responses": {
                    "201": answer("Started", ref("CommandResult")),
                    **refusals(400, 403),
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
                    "200": answer(
                        "The events, oldest first",
                        {
                            "type": "object",
                            "properties": {
                                "events": {"type": "array", "items": {"type": "object"}}
                            },
                        },
                    ),
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
                    "201": answer(
                        "The new key; the old one stops working",
                        {
                            "type": "object",
                            "properties": {"key": {"type": "string"}, "user": {"type": "string"}},
                        },
                    ),
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
    schemas = {
        "SessionSummary": SESSION_SUMMARY,
        "Session": SESSION,
        "Decoding": decoding_schema(),
        "CommandResult": COMMAND_RESULT,
        "Error": ERROR,
    }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Caesura API",
            "version": "1",
            "description": (
                'Errors are {"error": message}. Integer fields take JSON integers only;'
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
