"""The language a websocket answers in: the page's, chosen as Django's LocaleMiddleware chooses
it for a request (the language cookie, then Accept-Language, then the default), from the
handshake's cookies and headers. A refused command then says why in the page's language."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import translation


@dataclass(frozen=True)
class Handshake:
    """What of a request Django's choice reads, taken from a websocket's scope."""

    COOKIES: dict[str, str] = field(default_factory=dict)
    META: dict[str, str] = field(default_factory=dict)
    path_info: str = "/"


def language_of(scope: Mapping[str, Any]) -> str:
    headers = dict(scope.get("headers") or ())
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    cookies = dict(scope.get("cookies") or {})
    handshake = Handshake(cookies, {"HTTP_ACCEPT_LANGUAGE": accept})
    return translation.get_language_from_request(handshake)  # type: ignore[arg-type]
