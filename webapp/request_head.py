"""Answers to a request whose head is over the limits of daphne's HTTP server (Twisted: 16 KB a
line, 16 KB in all), before any of it reaches Django. Twisted dropped a line too long without
a word (a client saw its connection reset) and answered a head too large with a bare 400.
Now a request line (its URL and query string) too long gets a 414 and headers too large a 431,
each with a body shaped as the path's other errors (OpenAI's under /v1/, ``{"error": ...}``
under /api/, plain text elsewhere); then the connection closes, as before."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

LINE_LIMIT = 16384  # Twisted's LineReceiver.MAX_LENGTH
HEAD_LIMIT = 16384  # HTTPChannel.totalHeadersSize
FIRST_LINE = "_HTTPChannel__first_line"  # Twisted's own flag: the request line comes next


def install() -> None:
    try:
        from twisted.web import http
    except ImportError:  # another ASGI server: its own limits and answers
        return
    channel: Any = http.HTTPChannel
    if getattr(channel, "caesura_answers_heads", False):
        return
    plain_line = channel.lineReceived

    def line_received(self: Any, line: bytes) -> None:
        if self._receivedHeaderSize + len(line) > HEAD_LIMIT and not getattr(self, FIRST_LINE):
            refuse(self, 431, getattr(self, "caesura_path", ""))
            return
        if getattr(self, FIRST_LINE):
            self.caesura_path = path_of(line)
        plain_line(self, line)

    def line_too_long(self: Any, line: bytes) -> None:
        if getattr(self, FIRST_LINE):
            refuse(self, 414, path_of(line))
        else:
            refuse(self, 431, getattr(self, "caesura_path", ""))

    channel.lineReceived = line_received
    channel.lineLengthExceeded = line_too_long
    channel.caesura_answers_heads = True


def path_of(line: bytes) -> str:
    """The path a request line names, as far as it came (``GET /api/x?q=... HTTP/1.1``)."""
    parts = line.split(b" ", 2)
    return parts[1].decode("latin-1") if len(parts) > 1 else ""


MESSAGES = {
    414: (
        "uri_too_long",
        f"Request line too long: a URL with its query string may be at most {LINE_LIMIT} bytes;"
        " send long input in a request body",
    ),
    431: (
        "headers_too_large",
        f"Request headers too large: at most {HEAD_LIMIT} bytes in all, and {LINE_LIMIT} a line",
    ),
}


def refuse(channel: Any, status: int, path: str) -> None:
    """Answer ``status`` on the wire and close: Django never saw the request."""
    from reviewer.gateway.errors import error_body  # Django is set up by the time one comes

    code, message = MESSAGES[status]
    if path.startswith("/v1/"):
        body, kind = json.dumps(error_body(status, message, code=code)).encode(), "application/json"
    elif path.startswith("/api/"):
        body, kind = json.dumps({"error": message}).encode(), "application/json"
    else:
        body, kind = message.encode() + b"\n", "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    channel.transport.write(head.encode() + body)
    channel.loseConnection()
