"""Reason phrases for the statuses daphne's HTTP server (Twisted) does not know, so that a 422 or
a 429 reads "422 Unprocessable Entity" on the wire rather than "422 Unknown Status": ASGI
carries the status code alone, and Twisted looks its phrase up in its own table."""

from __future__ import annotations

from http import HTTPStatus


def fill() -> None:
    try:
        from twisted.web import http
    except ImportError:  # another ASGI server: it has its own phrases
        return
    for status in HTTPStatus:
        http.RESPONSES.setdefault(status.value, status.phrase.encode())
