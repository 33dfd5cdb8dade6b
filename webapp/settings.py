"""Django settings for Caesura. Every value a deployment may change comes from the environment."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from csp.constants import NONCE, NONE, SELF, UNSAFE_HASHES
from django.core.exceptions import ImproperlyConfigured

from webapp.env import (
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_lockout_parameters,
    env_log_level,
    env_path,
    env_secret,
    env_str,
    env_time_zone,
    env_url,
    mask_url,
)

# Lets the admin classes name their model (ModelAdmin[Domain]), as django-stubs types them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = env_path("CAESURA_DATA_DIR", BASE_DIR / "var")
MODEL_DIR = env_path("CAESURA_MODEL", DATA_DIR / "models" / "smollm2-135m-instruct")
VAULT_DIR = DATA_DIR / "vault"
PAUSE_MODEL_DIR = DATA_DIR / "pause_models"  # learned pause models, named by their SHA-256

SECRET_KEY = env_secret("SECRET_KEY", DATA_DIR / "secret_key")
VAULT_KEY = env_secret("CAESURA_VAULT_KEY", DATA_DIR / "vault_key")
# Off unless asked for: a debug page shows tracebacks, settings and the URL list to anyone.
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "reviewer.apps.LoginRecordsConfig",  # django-axes, named for the admin
    "csp",
    "reviewer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.security.ContentSecurityPolicyMiddleware",
    # Before CommonMiddleware, which would answer a bad Host with an HTML page.
    "webapp.errors.ApiErrorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a lockout into the login page's answer
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",
            ],
        },
    },
]

POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql")  # dj_database_url's, for Postgres
DATABASE_URL = env_url(
    "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/caesura", POSTGRES_SCHEMES
)
# Under ASGI, Django runs each request's sync code in a thread of its own, so a connection kept
# per thread is never reused there: every request and every socket opened a new one (about
# 5 ms, and a new Postgres backend). The web server therefore takes its connections from a pool
# of at most CAESURA_DB_POOL_SIZE (the launchers set it for daphne). 0, the default, keeps one
# connection per thread for up to a minute, as the workers need: a relay's thread holds one
# for a whole generation, so a bounded pool would bound the sessions a worker runs.
DB_POOL_SIZE = env_int("CAESURA_DB_POOL_SIZE", 0, minimum=0)
DB_POOL_WAIT_S = 10  # the longest a request waits for a pooled connection before a 503
# A connection to an address that does not answer waits this long, not the system's TCP
# timeout (minutes): a health probe, a request or a worker's task then fails in time to say so.
DB_CONNECT_TIMEOUT_S = env_int("CAESURA_DB_CONNECT_TIMEOUT_S", 5, minimum=1)


def database(url: str, pool_size: int, connect_timeout_s: int = 5) -> dict[str, Any]:
    # A kept connection is checked before a request (or a worker's task) reuses it.
    try:
        parsed = dj_database_url.parse(
            url, conn_max_age=0 if pool_size else 60, conn_health_checks=True
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL={mask_url(url)!r}: {exc}") from None
    if not parsed.get("NAME"):
        raise ImproperlyConfigured(f"DATABASE_URL={mask_url(url)!r} names no database")
    config: dict[str, Any] = dict(parsed)
    options = dict(config.get("OPTIONS") or {})
    options.setdefault("connect_timeout", connect_timeout_s)  # the URL's own wins
    if pool_size:
        options["pool"] = {
            "min_size": min(2, pool_size),
            "max_size": pool_size,
            "timeout": DB_POOL_WAIT_S,
        }
    config["OPTIONS"] = options
    return config


DATABASES = {"default": database(DATABASE_URL, DB_POOL_SIZE, DB_CONNECT_TIMEOUT_S)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_SCHEMES = ("redis", "rediss", "unix")  # redis-py's
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", REDIS_SCHEMES)
# A consumer waits for its next message with BZPOPMIN, which Redis answers after
# channels_redis's 5 s `brpop_timeout` when nothing came. redis-py 8 gives every connection a
# 5 s socket timeout by default, so on a quiet socket (a paused or finished session) the read
# gave up just before that answer, the consumer died and the page's socket dropped every 5 s.
# Reads must outlast the blocking pop, but stay bounded so a dead connection is still noticed
# (redis-py's TCP keepalive probes cover the time between reads).
CHANNEL_LAYER_BLOCKING_POP_S = 5  # channels_redis.core.RedisChannelLayer.brpop_timeout
CHANNEL_LAYER_SOCKET_TIMEOUT_S = CHANNEL_LAYER_BLOCKING_POP_S + 5
CHANNEL_LAYERS = {
    "default": {
        # channels_redis's layer, with a group send of two round trips (reviewer/events/channel_layer.py)
        "BACKEND": "reviewer.events.channel_layer.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_S}]
        },
    }
}

# pytest sets PYTEST_VERSION: tests (and the worker processes they start) use their own queue,
# so a development worker never picks up a test's task.
RUNNING_TESTS = "PYTEST_VERSION" in os.environ
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = env_str("CAESURA_QUEUE", "caesura-test" if RUNNING_TESTS else "caesura")
CELERY_RESULT_BACKEND = None
# Celery's Django fixup closes the database connection around every task, so each segment's
# start opened a new one (about 5 ms before its prefill). A task keeps it, as a request does:
# reviewer/worker/tasks.py drops a stale or broken one before each task.
CELERY_DB_REUSE_MAX = 1_000_000_000
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_DIRECT = (
    True  # a queue per worker, so a resume can reach the worker holding the state
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker reconnects to the broker for as long as Redis is away, and a segment that was
# running when the connection dropped goes on (it cannot be interrupted in a solo pool).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out login before the password
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "session-list"
LOGOUT_REDIRECT_URL = "login"

# Login throttling (django-axes) on /login/ and /admin/login/, made for a floor whose reviewers
# share one address: CAESURA_LOGIN_FAILURE_LIMIT failures lock the account (from anywhere) and the
# (account, address) pair; each further lockout of the account within CAESURA_LOGIN_BACKOFF_HOURS
# lasts twice as long, up to CAESURA_LOGIN_LOCKOUT_MAX_MINUTES; the address itself is locked only
# after CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT failures; and CAESURA_LOGIN_DAY_FAILURE_LIMIT failures
# of an account within CAESURA_LOGIN_BACKOFF_HOURS since its last login lock it however slowly they
# came, until the oldest of them is that old (reviewer/web/floor_lockout.py).
AXES_FAILURE_LIMIT = env_int("CAESURA_LOGIN_FAILURE_LIMIT", 5, minimum=1)
CAESURA_LOGIN_LOCKOUT_MINUTES = env_int("CAESURA_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
CAESURA_LOGIN_LOCKOUT_MAX_MINUTES = env_int(
    "CAESURA_LOGIN_LOCKOUT_MAX_MINUTES", 240, minimum=CAESURA_LOGIN_LOCKOUT_MINUTES
)
CAESURA_LOGIN_BACKOFF_HOURS = env_int("CAESURA_LOGIN_BACKOFF_HOURS", 24, minimum=1)
CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT = env_int(
    "CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT", 100, minimum=AXES_FAILURE_LIMIT
)
CAESURA_LOGIN_DAY_FAILURE_LIMIT = env_int(
    "CAESURA_LOGIN_DAY_FAILURE_LIMIT", 30, minimum=AXES_FAILURE_LIMIT
)
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # each failure, kept for the slow-guessing lock
# axes trims an account's failure log past this many entries: never the day's guesses
AXES_ACCESS_FAILURE_LOG_PER_USER_LIMIT = max(1000, 10 * CAESURA_LOGIN_DAY_FAILURE_LIMIT)
AXES_COOLOFF_TIME = "reviewer.web.floor_lockout.cool_off"
AXES_HANDLER = "reviewer.web.floor_lockout.FloorLockoutHandler"
AXES_USE_ATTEMPT_EXPIRATION = True  # each account's attempts last as long as its own lockout
AXES_LOCKOUT_PARAMETERS = env_lockout_parameters(
    "CAESURA_LOGIN_LOCKOUT_BY", ["username", ["username", "ip_address"]]
)
AXES_RESET_ON_SUCCESS = True  # a reviewer who mistypes once and then logs in starts afresh
AXES_LOCKOUT_CALLABLE = "reviewer.web.lockout.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False  # its start-up banner would print on every manage.py command

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "frontend" / "locale"]
TIME_ZONE = env_time_zone("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
SERVE_STATIC = env_bool("CAESURA_SERVE_STATIC", True)

# Request bodies above this answer 413 (JSON under /api/). File uploads are not counted.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("CAESURA_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
# daphne closes a websocket on a message larger than this (its default, which scripts/run.sh and
# the Dockerfile keep): the session page refuses a larger command before sending it.
SOCKET_MESSAGE_MAX_BYTES = 1024 * 1024

# --- HTTP security ---------------------------------------------------------------------------
# CAESURA_HTTPS=1: clients reach Caesura over HTTPS through a reverse proxy that terminates
# TLS, sets X-Forwarded-Proto and redirects plain HTTP. Cookies are then sent over HTTPS only
# and HSTS is on; redirecting plain HTTP stays the proxy's job unless SECURE_SSL_REDIRECT=1.
CAESURA_HTTPS = env_bool("CAESURA_HTTPS", False)
if CAESURA_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Probes and scrapes reach the process itself over plain HTTP (compose's healthcheck, a load
# balancer, Prometheus on the internal port): never redirected, or they would fail.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if CAESURA_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", CAESURA_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", CAESURA_HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", CAESURA_HTTPS)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "webapp.errors.csrf_failure"
SILENCED_SYSTEM_CHECKS = [
    # HSTS preloading is a promise about the whole domain, for its owner to make
    # (SECURE_HSTS_PRELOAD=1), not a default.
    "security.W021",
]
if CAESURA_HTTPS and not SECURE_SSL_REDIRECT:
    SILENCED_SYSTEM_CHECKS.append("security.W008")  # the proxy redirects plain HTTP

# Every page: scripts and styles from this origin only (an inline one needs the page's nonce),
# Plotly from /vendor/, the session socket to this host (ws: and wss: added per request).
# Style attributes are refused but for the two the pinned Plotly sets on its heatmaps, allowed
# by hash: the crisp-pixel rendering of a heatmap image and the empty reset of a colour bar.
PLOTLY_STYLE_ATTRIBUTES = (
    "".join(
        f"image-rendering: {value}; "
        for value in (
            "optimizeSpeed",
            "-moz-crisp-edges",
            "-o-crisp-edges",
            "-webkit-optimize-contrast",
            "optimize-contrast",
            "crisp-edges",
            "pixelated",
        )
    ),
    "",
)


def csp_hash(text: str) -> str:
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return f"'sha256-{digest}'"


CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "style-src-attr": [UNSAFE_HASHES, *map(csp_hash, PLOTLY_STYLE_ATTRIBUTES)],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# /metrics is open for scraping unless this is set; then it asks `Authorization: Bearer <token>`.
CAESURA_METRICS_TOKEN = env_str("CAESURA_METRICS_TOKEN", "")

# Engine and worker knobs.
# The engine the workers run: transformers (the default; live attention, hidden states and
# every policy kind) or vllm (many sessions in one batch; see docs/backends.md).
CAESURA_BACKEND = env_choice("CAESURA_BACKEND", "transformers", ("transformers", "vllm"))
CAESURA_MAX_NEW_TOKENS = env_int("CAESURA_MAX_NEW_TOKENS", 200, minimum=1)
CAESURA_WORKER_STATE_BUDGET_MB = env_int("CAESURA_WORKER_STATE_BUDGET_MB", 512, minimum=1)
# A gateway generation's tokens are written (and broadcast) in runs of up to this many, the
# first held at most HOLD_MS for the rest: fewer writes on cores the model keeps busy
# (reviewer/worker/relay.py). While a reviewer's page follows the session, and with 1, each
# token is written as it comes; a token that lets delayed delivery send more goes at once.
# Nobody waits on a held token, so the hold is long: with eight generations at once a hold of
# a second wrote most of their runs (docs/benchmarks.md).
CAESURA_GATEWAY_RELAY_TOKENS = env_int("CAESURA_GATEWAY_RELAY_TOKENS", 32, minimum=1)
CAESURA_GATEWAY_RELAY_HOLD_MS = env_int("CAESURA_GATEWAY_RELAY_HOLD_MS", 10_000, minimum=0)
# A streaming gateway call that waits (for review, or at a pause) gets an SSE comment this
# often; a client whose read timeout is this long or shorter would give up while it waits.
CAESURA_GATEWAY_KEEPALIVE_S = env_int("CAESURA_GATEWAY_KEEPALIVE_S", 15, minimum=1)
# A reviewer's own sessions generating at once (a start or resume past it gets 429); an
# application's limit is its own (Application.max_concurrent).
CAESURA_REVIEWER_MAX_GENERATING = env_int("CAESURA_REVIEWER_MAX_GENERATING", 16, minimum=1)
# A replay of stored events (a session socket's, one GET /api/sessions/<id>/events) is paged by
# size as well as by count: a long session's token events each carry an attention row over their
# whole context (reviewer/events: events_page).
CAESURA_EVENTS_PAGE_BYTES = env_int("CAESURA_EVENTS_PAGE_BYTES", 4_000_000, minimum=10_000)
# Input limits (characters), checked before the tokenizer sees the text (reviewer/web/arguments.py).
CAESURA_MAX_INPUT_CHARS = env_int("CAESURA_MAX_INPUT_CHARS", 50_000, minimum=1)
CAESURA_MAX_EDIT_CHARS = env_int("CAESURA_MAX_EDIT_CHARS", 4_000, minimum=1)
# A Redis outage (broker, channel layer, pause flags) shorter than this does not fail a session.
CAESURA_REDIS_GRACE_S = env_int("CAESURA_REDIS_GRACE_S", 30, minimum=0)
# Prometheus multiprocess files, keyed by queue so a test run never mixes with a dev server.
CAESURA_METRICS_DIR = env_path(
    "CAESURA_METRICS_DIR", DATA_DIR / "metrics" / CELERY_TASK_DEFAULT_QUEUE
)
# 0: off. A worker numbered n serves on this port + n (metrics.serve_worker_metrics).
CAESURA_WORKER_METRICS_PORT = env_int("CAESURA_WORKER_METRICS_PORT", 0, minimum=0, maximum=65535)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_log_level("LOG_LEVEL", "INFO")},
}
