"""Django settings, all read from the environment.

Safe local defaults: SQLite under var/, an embedded Redis on a unix socket
under var/, DEBUG off unless ADVISOR_DEBUG=1 (`manage.py runlocal` sets it).
`ADVISOR_PRODUCTION=1` turns on HTTPS hardening and refuses the dev secret.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """1/true/yes/on or 0/false/no/off (any case); anything else is an error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in _TRUE | _FALSE:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1 or 0")
    return value in _TRUE


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str], sep: str = ",") -> list[str]:
    """A separated list; blank items are dropped, so "" means an empty list."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(sep) if item.strip()]


# Runtime files (SQLite, Redis socket, demo models); the test script moves it.
VAR_DIR = Path(env_str("ADVISOR_VAR_DIR") or BASE_DIR / "var").resolve()

# --- Core -------------------------------------------------------------------

PRODUCTION = env_bool("ADVISOR_PRODUCTION")
DEBUG = env_bool("ADVISOR_DEBUG")


def local_secret_key(path: Path) -> str:
    """This machine's own random key, made once (mode 0600) and kept under var/.

    Never a key written in the source: a site started without SECRET_KEY still
    signs its sessions with a secret nobody else knows. The key is written to a file of
    its own and then linked into place, so a process starting beside the one that makes
    it reads the whole key or none, never an empty file.
    """
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = _make_secret_key(path)
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it, and a key is made again")
    return key


def _make_secret_key(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd, written = tempfile.mkstemp(prefix=".secret_key.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key)
        os.link(written, path)  # fails where another process made it first
    except FileExistsError:
        return path.read_text().strip()
    finally:
        os.unlink(written)
    return key


SECRET_KEY = env_str("SECRET_KEY").strip()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost"])
if PRODUCTION and len(SECRET_KEY) < 32:
    raise ImproperlyConfigured(
        "ADVISOR_PRODUCTION=1 needs SECRET_KEY in the environment (32 characters or more), "
        "the same on every site process"
    )
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "ADVISOR_PRODUCTION=1 needs ALLOWED_HOSTS: the host names the site answers to"
    )
SECRET_KEY = SECRET_KEY or local_secret_key(VAR_DIR / "secret_key")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "advisor.jobs",
    "advisor.reports",
]

MIDDLEWARE = [
    # Outermost, so it also compresses what WhiteNoise serves from the finders on a
    # local run (plotly.min.js: 4.8 MB, about 1.4 MB gzipped); files collectstatic
    # compressed ahead of time already carry Content-Encoding and pass untouched.
    # Django's gzip pads HTML against BREACH.
    "django.middleware.gzip.GZipMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "advisor.urls"
WSGI_APPLICATION = "advisor.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Network bounds ---------------------------------------------------------

# Every network client (PostgreSQL, the broker, the shared cache) gives up on a call
# within a stated bound, so a cut link, however long, costs a failed call and a retry,
# never a process hung on a socket (docs/promises.md, "A network partition").
ADVISOR_DB_CONNECT_TIMEOUT_S = env_int("ADVISOR_DB_CONNECT_TIMEOUT_S", 5, minimum=2)  # libpq: >= 2
ADVISOR_REDIS_CONNECT_TIMEOUT_S = env_int("ADVISOR_REDIS_CONNECT_TIMEOUT_S", 3, minimum=1)
# A broker command's reply; Celery's BRPOP asks the server for an answer within 1 s.
ADVISOR_REDIS_TIMEOUT_S = env_int("ADVISOR_REDIS_TIMEOUT_S", 5, minimum=2)
# Connect and reply of the shared cache, which pages read on each view: kept short.
ADVISOR_CACHE_TIMEOUT_S = env_int("ADVISOR_CACHE_TIMEOUT_S", 2, minimum=1)
# A link that drops packets without a reset is declared dead after this long, even while
# a call waits on it: TCP keepalives (idle, then 3 probes) for a connection that waits
# for an answer, TCP_USER_TIMEOUT for one whose sent data goes unacknowledged.
ADVISOR_DEAD_LINK_S = env_int("ADVISOR_DEAD_LINK_S", 25, minimum=4)
# How often the worker checks its broker connections (kombu drops one whose answer is overdue).
ADVISOR_BROKER_HEALTH_CHECK_S = env_int("ADVISOR_BROKER_HEALTH_CHECK_S", 10, minimum=1)
KEEPALIVE_PROBES = 3
KEEPALIVE_INTERVAL_S = max(1, ADVISOR_DEAD_LINK_S // 5)
KEEPALIVE_IDLE_S = ADVISOR_DEAD_LINK_S - KEEPALIVE_PROBES * KEEPALIVE_INTERVAL_S


def tcp_keepalive_options() -> dict[int, int]:
    """redis-py's `socket_keepalive_options` (IPPROTO_TCP options) for ADVISOR_DEAD_LINK_S;
    the ones this platform lacks are left out (macOS names the idle time TCP_KEEPALIVE)."""
    wanted = {
        ("TCP_KEEPIDLE", "TCP_KEEPALIVE"): KEEPALIVE_IDLE_S,
        ("TCP_KEEPINTVL",): KEEPALIVE_INTERVAL_S,
        ("TCP_KEEPCNT",): KEEPALIVE_PROBES,
        ("TCP_USER_TIMEOUT",): ADVISOR_DEAD_LINK_S * 1000,  # milliseconds
    }
    options = {}
    for names, value in wanted.items():
        constant = next((getattr(socket, n) for n in names if hasattr(socket, n)), None)
        if constant is not None:
            options[constant] = value
    return options


def redis_tcp_options(connect_timeout_s: int, timeout_s: int) -> dict[str, Any]:
    """Timeouts and keepalives for a redis-py connection. Only TCP connections take the
    keepalive options: kombu drops them for `redis+socket://`, `advisor.cache` for `unix://`."""
    return {
        "socket_connect_timeout": connect_timeout_s,
        "socket_timeout": timeout_s,
        "socket_keepalive": True,
        "socket_keepalive_options": tcp_keepalive_options(),
    }


# --- Database ---------------------------------------------------------------


def _sqlite(path: Path, test_path: Path) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        # Worker subprocesses write heartbeats while the site reads: WAL lets
        # readers and one writer overlap, IMMEDIATE avoids upgrade deadlocks.
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # A file, never :memory:, so worker processes in tests see the rows.
        "TEST": {"NAME": str(test_path)},
    }


DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    }
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # A database that is down or cut off fails a request in seconds (503, Retry-After:
        # `advisor.outage`), never hangs it: libpq gives up connecting after
        # ADVISOR_DB_CONNECT_TIMEOUT_S, and a silently dropped link is found within
        # ADVISOR_DEAD_LINK_S: by keepalives while a query waits for its answer, by
        # tcp_user_timeout while what was sent goes unacknowledged (retransmissions
        # alone would wait about 15 minutes).
        DATABASES["default"].setdefault("OPTIONS", {}).update({
            "connect_timeout": ADVISOR_DB_CONNECT_TIMEOUT_S, "keepalives": 1,
            "keepalives_idle": KEEPALIVE_IDLE_S, "keepalives_interval": KEEPALIVE_INTERVAL_S,
            "keepalives_count": KEEPALIVE_PROBES, "tcp_user_timeout": ADVISOR_DEAD_LINK_S * 1000,
        })  # fmt: skip
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite cannot create its directory
    DATABASES = {
        "default": _sqlite(
            VAR_DIR / "advisor.sqlite3",
            Path(env_str("ADVISOR_TEST_DB_NAME") or VAR_DIR / "test-advisor.sqlite3"),
        )
    }
# Points a process at another database of the same server: test workers use
# it to open the test database the pytest process created.
if env_str("ADVISOR_DB_NAME"):
    DATABASES["default"]["NAME"] = env_str("ADVISOR_DB_NAME")

# --- Static files -----------------------------------------------------------

STATIC_URL = "static/"
# Optional: WhiteNoise serves from the finders; set it to run collectstatic.
STATIC_ROOT = env_str("STATIC_ROOT") or None
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # {% static 'plotly/plotly.min.js' %} is served from the installed package.
    ("plotly", Path(plotly.__file__).parent / "package_data"),
]
# Serve straight from the finders: no collectstatic step for local runs.
WHITENOISE_USE_FINDERS = True
if STATIC_ROOT:
    # Production: `manage.py collectstatic` writes hashed names and gzip/brotli
    # copies once; WhiteNoise serves them compressed with far-future caching.
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

# --- Security (production) --------------------------------------------------

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("ADVISOR_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("ADVISOR_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    if env_bool("ADVISOR_BEHIND_PROXY"):
        # Only behind a proxy that sets this header itself (never trust a client's).
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# advisor.* logs go to the root logger: the console here, Celery's format in a
# worker (Celery replaces the root handlers there).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {"advisor": {"level": env_str("ADVISOR_LOG_LEVEL", "INFO")}},
}

# --- Advisor ----------------------------------------------------------------

# Directories workers may load local models from; empty: no local directory at all.
ADVISOR_MODEL_ROOTS = env_list("ADVISOR_MODEL_ROOTS", [str(VAR_DIR / "models")], sep=os.pathsep)
ADVISOR_DEMO_DIR = env_str("ADVISOR_DEMO_DIR") or str(VAR_DIR / "demo")
# The worker's GPUs, leased to one job at a time (advisor.jobs.gpus): CUDA indices
# "0,1,2,3", "auto" (every one the device probe finds) or "" (a CPU worker).
ADVISOR_WORKER_GPUS = env_str("ADVISOR_WORKER_GPUS", "auto")
ADVISOR_JOB_TIME_LIMIT_S = env_int("ADVISOR_JOB_TIME_LIMIT_S", 3600, minimum=1)
ADVISOR_HEARTBEAT_S = env_int("ADVISOR_HEARTBEAT_S", 5, minimum=1)
ADVISOR_HEARTBEAT_STALE_S = env_int("ADVISOR_HEARTBEAT_STALE_S", 120, minimum=1)
ADVISOR_WORKER_HEARTBEAT_S = env_int("ADVISOR_WORKER_HEARTBEAT_S", 15, minimum=1)
ADVISOR_WORKER_STALE_S = env_int("ADVISOR_WORKER_STALE_S", 60, minimum=1)
ADVISOR_MAX_ATTEMPTS = env_int("ADVISOR_MAX_ATTEMPTS", 3, minimum=1)
ADVISOR_REAP_EVERY_S = env_int("ADVISOR_REAP_EVERY_S", 30, minimum=1)
# A queued job published this long ago whose message Redis no longer holds
# (a restart without persistence loses them all) is published again.
ADVISOR_REDISPATCH_GRACE_S = env_int("ADVISOR_REDISPATCH_GRACE_S", 15, minimum=1)
if ADVISOR_HEARTBEAT_STALE_S <= 2 * ADVISOR_HEARTBEAT_S:
    raise ImproperlyConfigured("ADVISOR_HEARTBEAT_STALE_S must exceed two heartbeats")
# When set, creating a job needs this token on every path: the form asks for it
# (once per browser session), the API wants `Authorization: Bearer <token>`,
# `submit_job` takes --token. Reading a share link never needs it.
ADVISOR_API_TOKEN = env_str("ADVISOR_API_TOKEN").strip()


def env_rate(name: str, default: str) -> str:
    """A django-ratelimit rate ("10/m", "60/h"); "" or "0" turns the limit off."""
    raw = env_str(name, default).strip()
    if raw in ("", "0"):
        return ""
    count, _, period = raw.partition("/")
    if not (count.isascii() and count.isdigit() and period[-1:] in ("s", "m", "h", "d")):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate like 10/m or 60/h")
    return raw


# Rate limits, counted in the shared cache across every process (advisor.limits).
ADVISOR_SUBMIT_RATE = env_rate("ADVISOR_SUBMIT_RATE", "60/h")  # jobs per client address
ADVISOR_COMMENT_RATE = env_rate("ADVISOR_COMMENT_RATE", "6/m")  # comments per client address
ADVISOR_THREAD_RATE = env_rate("ADVISOR_THREAD_RATE", "120/h")  # comments per share link
# The header a trusted reverse proxy sets to the client's address (e.g.
# X-Forwarded-For, whose last entry the proxy appended); blank: the socket's.
ADVISOR_CLIENT_IP_HEADER = env_str("ADVISOR_CLIENT_IP_HEADER").strip()
RATELIMIT_USE_CACHE = "default"
# The largest JSON body the API reads (a job request is a few hundred bytes).
ADVISOR_API_MAX_BODY_BYTES = env_int("ADVISOR_API_MAX_BODY_BYTES", 65_536, minimum=1024)

# --- Celery -----------------------------------------------------------------

# With no broker configured, the site and workers share an embedded Redis on a
# unix socket (started on demand by advisor.embedded_redis).
_BROKER = env_str("CELERY_BROKER_URL") or env_str("REDIS_URL")
ADVISOR_EMBEDDED_REDIS = None if _BROKER else str(VAR_DIR / "redis.sock")
CELERY_BROKER_URL = _BROKER or f"redis+socket://{ADVISOR_EMBEDDED_REDIS}"

# The job's own deadline comes first; Celery's limits are the backstop.
CELERY_TASK_SOFT_TIME_LIMIT = ADVISOR_JOB_TIME_LIMIT_S + 30
CELERY_TASK_TIME_LIMIT = ADVISOR_JOB_TIME_LIMIT_S + 60
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Longer than the hard limit, or Redis re-delivers jobs that still run.
    "visibility_timeout": CELERY_TASK_TIME_LIMIT + 600,
    # Without a socket timeout a publish or an ack on a dead link waits for TCP to give
    # up (about 15 minutes), and the worker's event loop waits with it.
    **redis_tcp_options(ADVISOR_REDIS_CONNECT_TIMEOUT_S, ADVISOR_REDIS_TIMEOUT_S),
    # kombu's own check of the consumer's BRPOP and pub/sub connections: one whose
    # answer is overdue is dropped and the worker reconnects. (Celery's broker heartbeat
    # is AMQP's: kombu's Redis transport has none, so this and the keepalives stand in.)
    "health_check_interval": ADVISOR_BROKER_HEALTH_CHECK_S,
}
# How long one connection attempt to the broker may take in all (kombu's retries
# within it included) before a publish or a read of the queues gives up.
CELERY_BROKER_CONNECTION_TIMEOUT = ADVISOR_REDIS_CONNECT_TIMEOUT_S + 1
# A worker cut off from the broker keeps trying to reconnect (every 30 s at most),
# however long the cut: Celery's default gives up after 100 tries, about 50 minutes.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True  # the job row is the result
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False  # the reaper re-queues, counting attempts
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_PUBLISH_RETRY = True
# A dead broker must fail a submit within about a second, not hang the page.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No beat schedule: every worker's main process runs the reaper from its
# announcer thread (and the site from its pages), throttled fleet-wide by a key
# in the shared cache, so a backlog of jobs on a queue can never starve it.

# --- The shared cache -------------------------------------------------------


def cache_location(broker_url: str) -> str | None:
    """The shared cache's Redis URL beside the broker's (database 1), or None if not Redis."""
    if broker_url.startswith("redis+socket://"):
        return f"unix://{broker_url.removeprefix('redis+socket://')}?db=1"
    if broker_url.startswith(("redis://", "rediss://")):
        base, _, _db = broker_url.partition("?")[0].rpartition("/")
        return f"{base}/1" if base.count("/") >= 2 else f"{broker_url.rstrip('/')}/1"
    return None


# Rate limits and the reaper's throttle must hold across every site and worker
# process: they live in Redis (the embedded one on a laptop), never in memory.
ADVISOR_CACHE_URL = env_str("ADVISOR_CACHE_URL") or cache_location(CELERY_BROKER_URL)
if ADVISOR_CACHE_URL is None:
    raise ImproperlyConfigured(
        "The shared cache needs Redis: set ADVISOR_CACHE_URL=redis://host:6379/1 "
        "(the broker is not Redis)"
    )
CACHES = {
    "default": {
        "BACKEND": "advisor.cache.SharedRedisCache",
        "LOCATION": ADVISOR_CACHE_URL,
        "KEY_PREFIX": "advisor",
        "OPTIONS": {
            "serializer": "advisor.cache.JSONSerializer",
            **redis_tcp_options(ADVISOR_CACHE_TIMEOUT_S, ADVISOR_CACHE_TIMEOUT_S),
        },
    }
}
