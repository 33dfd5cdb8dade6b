"""Per-application limits: requests in any one minute (a Redis counter per application and
minute) and generations not yet ended at once (counted under the application's row lock in
reviewer.lifecycle.gateway, where the generation is created). Over either: 429 with
Retry-After, and nothing is changed."""

from __future__ import annotations

import time

import redis

from reviewer.gateway.errors import GatewayError
from reviewer.models import Application
from reviewer.web.health import namespace, redis_client

WINDOW_S = 60


def rate_key(application_id: int, window: int) -> str:
    # The namespace (database and queue) keeps installations sharing one Redis apart.
    return f"{namespace()}:rate:{application_id}:{window}"


def count_request(application: Application, now: float | None = None) -> None:
    """Count this request in the application's current minute; refuse it over the limit."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    key = rate_key(application.pk, window)
    try:
        pipe = redis_client().pipeline()
        pipe.incr(key)
        pipe.expire(key, WINDOW_S * 2)
        count = int(pipe.execute()[0])
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        raise GatewayError(
            503, "The request counter (Redis) is out of reach; nothing was started, try again"
        ) from None
    if count > application.requests_per_minute:
        retry_after = max(1, int((window + 1) * WINDOW_S - now) + 1)
        raise GatewayError(
            429,
            f"Rate limit reached: {application.requests_per_minute} requests per minute for"
            f" this application; retry in {retry_after} s",
            code="rate_limit_exceeded",
            retry_after=retry_after,
        )
