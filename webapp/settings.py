"""Django settings for Caesura. Every value a deployment may change comes from the environment."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from webapp.env import env_bool, env_int, env_list, env_path, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = env_path("CAESURA_DATA_DIR", BASE_DIR / "var")
MODEL_DIR = env_path("CAESURA_MODEL", DATA_DIR / "models" / "smollm2-135m-instruct")
VAULT_DIR = DATA_DIR / "vault"

SECRET_KEY = env_secret("SECRET_KEY", DATA_DIR / "secret_key")
VAULT_KEY = env_secret("CAESURA_VAULT_KEY", DATA_DIR / "vault_key")
DEBUG = env_bool("DEBUG", True)
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
    "reviewer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/caesura")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

# pytest sets PYTEST_VERSION: tests (and the worker processes they start) use their own queue,
# so a development worker never picks up a test's task.
RUNNING_TESTS = "PYTEST_VERSION" in os.environ
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = env_str("CAESURA_QUEUE", "caesura-test" if RUNNING_TESTS else "caesura")
CELERY_RESULT_BACKEND = None
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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "session-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "frontend" / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
SERVE_STATIC = env_bool("CAESURA_SERVE_STATIC", True)

# Engine and worker knobs.
CAESURA_MAX_NEW_TOKENS = env_int("CAESURA_MAX_NEW_TOKENS", 200, minimum=1)
CAESURA_WORKER_STATE_BUDGET_MB = env_int("CAESURA_WORKER_STATE_BUDGET_MB", 512, minimum=1)
# A Redis outage (broker, channel layer, pause flags) shorter than this does not fail a session.
CAESURA_REDIS_GRACE_S = env_int("CAESURA_REDIS_GRACE_S", 30, minimum=0)
# Prometheus multiprocess files, keyed by queue so a test run never mixes with a dev server.
CAESURA_METRICS_DIR = env_path(
    "CAESURA_METRICS_DIR", DATA_DIR / "metrics" / CELERY_TASK_DEFAULT_QUEUE
)
CAESURA_WORKER_METRICS_PORT = env_int("CAESURA_WORKER_METRICS_PORT", 0, minimum=0)  # 0: off

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
