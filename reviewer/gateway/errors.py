"""Refusals in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, so the
SDK raises its own exception classes (401 AuthenticationError, 429 RateLimitError, ...)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from pydantic import ValidationError

# OpenAI's error types by status.
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
    504: "timeout_error",
}


class GatewayError(Exception):
    """A refused call: the status, and what the client is told."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)

    def response(self) -> JsonResponse:
        answer = JsonResponse(self.body(), status=self.status)
        if self.retry_after is not None:
            answer["Retry-After"] = str(self.retry_after)
        if self.status == 409:  # the generation's state: the SDK retries a 409 otherwise
            answer["x-should-retry"] = "false"
        return answer


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(status: int, message: str, code: str | None = None) -> JsonResponse:
    return GatewayError(status, message, code=code).response()


# The names pydantic gives the members of a union in an error's location ("prompt.str"):
# not parameters, so never shown.
UNION_MEMBERS = {"str", "int", "float", "bool", "list", "dict", "none"}


def where(loc: tuple[Any, ...]) -> list[str]:
    return [
        str(part)
        for part in loc
        if not (isinstance(part, str) and (part in UNION_MEMBERS or "[" in part))
    ]


def from_validation(exc: ValidationError) -> GatewayError:
    """The first thing wrong with a request body, named by its parameter. Of a union's
    errors, the one that went deepest (an item of a list, not "should be a string")."""
    errors = exc.errors()
    first = max(errors, key=lambda error: len(where(error["loc"])))
    loc = where(first["loc"])
    param = ".".join(loc) or first.get("ctx", {}).get("param")
    message = str(first["msg"]).removeprefix("Value error, ")
    shown = f"{param}: {message}" if loc else message  # a refusal names its own
    return GatewayError(400, f"Invalid request: {shown}", param=param, code="invalid_value")
