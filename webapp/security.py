"""The Content-Security-Policy header, with the session socket's own address allowed."""

from __future__ import annotations

from csp.middleware import CSPMiddleware, PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, plus `ws://host` and `wss://host` in connect-src: browsers that
    predate CSP level 3 do not count a websocket to this host as 'self'."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only:
            return parts
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts  # the answer is an error page; nothing on it opens a socket
        parts.update = {**(parts.update or {}), "connect-src": [f"ws://{host}", f"wss://{host}"]}
        return parts
