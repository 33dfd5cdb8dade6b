"""Every status Caesura answers has its reason phrase on daphne's wire."""

from __future__ import annotations

from twisted.web import http

import webapp.asgi  # noqa: F401  # fills the phrases, as daphne's import of it does


def test_it_names_the_statuses_twisted_does_not_know():
    assert http.RESPONSES[422] == b"Unprocessable Entity"
    assert http.RESPONSES[429] == b"Too Many Requests"
    assert http.RESPONSES[404] == b"Not Found"  # Twisted's own, unchanged
