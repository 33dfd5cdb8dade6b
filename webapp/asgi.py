"""ASGI entry point: HTTP through Django, websockets through the reviewer's routes."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: routing pulls in models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from reviewer.web import tokenizer  # noqa: E402
from reviewer.web.routing import websocket_urlpatterns  # noqa: E402
from webapp.heap import freeze_startup_objects  # noqa: E402
from webapp.reason_phrases import fill as fill_reason_phrases  # noqa: E402
from webapp.request_head import install as answer_oversized_heads  # noqa: E402

fill_reason_phrases()
answer_oversized_heads()

# Static assets are small and few; serving them from the app spares a separate web server.
http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
tokenizer.load_at_start()  # the first input checked would otherwise wait for it
freeze_startup_objects()  # the app is built: collections need not walk it again
