"""Settings, all from the environment (12-factor) with safe local defaults.

Embedded default (nothing set): SQLite under var/, in-memory channel layer, periodic
jobs inside the site process. Scale-out: DATABASE_URL and REDIS_URL switch on
PostgreSQL, channels_redis and Celery. Restart to reload.
"""
from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from tradingsite.local_secrets import new_fernet_key, new_secret_key, read_or_create

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=True)

if "SECRET_KEY" in env:
    SECRET_KEY = env.str("SECRET_KEY")
elif DEBUG:
    SECRET_KEY = read_or_create(VAR_DIR / "secret_key", new_secret_key)
else:
    raise ImproperlyConfigured(
        "SECRET_KEY is required when DEBUG is off: set the SECRET_KEY environment variable."
    )

# MultiFernet keys for broker tokens, newest first. Kept apart from SECRET_KEY so that
# rotating one never makes the other's ciphertexts unreadable.
if "TOKEN_ENCRYPTION_KEY" in env:
    TOKEN_ENCRYPTION_KEYS = env.list("TOKEN_ENCRYPTION_KEY")
elif DEBUG:
    TOKEN_ENCRYPTION_KEYS = [read_or_create(VAR_DIR / "token_encryption_key", new_fernet_key)]
else:
    # Checked where a broker token is first encrypted, with a named error.
    TOKEN_ENCRYPTION_KEYS = []

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Not "daphne": its app imports daphne.server, which installs Twisted's reactor on a
# default asyncio loop at django.setup(); runsite installs it on uvloop instead.
INSTALLED_APPS = [
    "tradingsite",  # first: its `runserver` (= runsite) wins over staticfiles' WSGI one
    "core",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_prometheus",
    "feeds",
    "processor",
    "orders",
    "recovery",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "tradingsite.urls"
ASGI_APPLICATION = "tradingsite.asgi.application"

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

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the runtime write ticks while the web reads; IMMEDIATE avoids
    # "database is locked" on read-then-write transactions.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=5000",
        "transaction_mode": "IMMEDIATE",
    }
    VAR_DIR.mkdir(parents=True, exist_ok=True)
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise

# Redis switches on every scale-out integration at once.
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default, the same 5 s that
            # channels_redis blocks in BZPOPMIN: the read then races the server's reply
            # and a cancelled send can surface as a TimeoutError. Read longer than it blocks.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Embedded default: periodic jobs run inside the site process; a stray .delay()
    # runs inline instead of waiting for a broker that does not exist.
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="celery")
# Cadence overrides for tradingsite.schedule, e.g. "clear-expired-sessions=600".
PERIODIC_JOB_INTERVALS: dict[str, float] = {}
for _item in env.list("PERIODIC_JOB_INTERVALS", default=[]):
    _name, _, _seconds = _item.partition("=")
    try:
        PERIODIC_JOB_INTERVALS[_name.strip()] = float(_seconds)
    except ValueError:
        raise ImproperlyConfigured(f"PERIODIC_JOB_INTERVALS: {_item!r} is not name=seconds") from None
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Runtime knobs. Browser pushes are conflated: at most one per instrument per interval.
DASHBOARD_PUSH_INTERVAL_S = env.float("DASHBOARD_PUSH_INTERVAL_S", default=0.25)
HEALTH_REPORT_INTERVAL_S = env.float("HEALTH_REPORT_INTERVAL_S", default=2.0)
# A clean stop (SIGINT/SIGTERM) drains in-flight trades and books the broker's fills
# within this bound, then cancels what is left.
RUNTIME_STOP_TIMEOUT_S = env.float("RUNTIME_STOP_TIMEOUT_S", default=20.0)
# A component whose process stopped reporting for this long counts as BLOCKED.
HEALTH_STALE_AFTER_S = env.float("HEALTH_STALE_AFTER_S", default=15.0)
# Prometheus scrapers authenticate with this bearer token; staff sessions also work.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# runfeed exposes its own Prometheus endpoint on this port when set (0 = off).
RUNTIME_METRICS_PORT = env.int("RUNTIME_METRICS_PORT", default=0)
RUNTIME_METRICS_ADDR = env.str("RUNTIME_METRICS_ADDR", default="127.0.0.1")

if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    # Probes and scrapers talk plain HTTP inside the cluster.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    if env.bool("BEHIND_TLS_PROXY", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
    },
}

# --- recovery (issue 7): broker tokens, auth prompts, provisioned token files ---------
# Upstox OAuth app (https://account.upstox.com/developer/apps); no client id = no Upstox login.
UPSTOX_CLIENT_ID = env.str("UPSTOX_CLIENT_ID", default="")
UPSTOX_CLIENT_SECRET = env.str("UPSTOX_CLIENT_SECRET", default="")
if UPSTOX_CLIENT_ID and not UPSTOX_CLIENT_SECRET:
    raise ImproperlyConfigured("UPSTOX_CLIENT_ID is set but UPSTOX_CLIENT_SECRET is not: set both or neither.")
# Must equal the redirect URI registered with the app; it points at recovery's callback view.
UPSTOX_REDIRECT_URI = env.str("UPSTOX_REDIRECT_URI", default="http://127.0.0.1:8000/recovery/callback/upstox")
# Overridable so tests (and a staging fake) can point the exchange at a local server.
UPSTOX_AUTHORIZE_URL = env.str(
    "UPSTOX_AUTHORIZE_URL", default="https://api.upstox.com/v2/login/authorization/dialog"
)
UPSTOX_TOKEN_URL = env.str("UPSTOX_TOKEN_URL", default="https://api.upstox.com/v2/login/authorization/token")
UPSTOX_TOKEN_TIMEOUT_S = env.float("UPSTOX_TOKEN_TIMEOUT_S", default=10.0)
# Provisioned tokens: "<broker>/<analytics|sandbox>" entries, read from
# <dir>/<broker>-<kind>.json (a mounted Secret in a cluster).
RECOVERY_PROVISIONED_TOKENS = env.list("RECOVERY_PROVISIONED_TOKENS", default=[])
RECOVERY_PROVISIONED_TOKEN_DIR = env.str(
    "RECOVERY_PROVISIONED_TOKEN_DIR", default=str(VAR_DIR / "provisioned-tokens")
)
RECOVERY_PROVISIONED_POLL_S = env.float("RECOVERY_PROVISIONED_POLL_S", default=30.0)
# How often runtime processes re-read OAuth token state written by the web process.
RECOVERY_TOKEN_STATE_POLL_S = env.float("RECOVERY_TOKEN_STATE_POLL_S", default=1.0)
# Auth-code submissions (form and OAuth redirect) per user per window; beyond it: HTTP 429.
RECOVERY_CODE_RATE_LIMIT = env.int("RECOVERY_CODE_RATE_LIMIT", default=5)
RECOVERY_CODE_RATE_WINDOW_S = env.int("RECOVERY_CODE_RATE_WINDOW_S", default=300)
# Tokens never reach a log line: redact on the console handler (defence in depth).
LOGGING.setdefault("filters", {})["redact_tokens"] = {"()": "recovery.redaction.RedactTokensFilter"}
LOGGING["handlers"]["console"].setdefault("filters", []).append("redact_tokens")

# --- dashboard, API and metrics (issue 8) ---------------------------------------------
INSTALLED_APPS += ["rest_framework", "rest_framework.authtoken", "drf_spectacular", "dashboard"]
# Chart library from npm (`npm ci`, see package.json); dashboard.checks fails loudly when
# the file is missing instead of serving a page whose charts silently never draw.
CHART_ASSET_DIR = Path(env.str("CHART_ASSET_DIR", default=str(BASE_DIR / "node_modules" / "lightweight-charts" / "dist")))
STATICFILES_DIRS += [("vendor/lightweight-charts", CHART_ASSET_DIR)]
REST_FRAMEWORK = {
    # Token first: an unauthenticated call gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": env.int("API_PAGE_SIZE", default=100),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Decimals go out as strings: a JSON number would be read as a float by most clients.
    "COERCE_DECIMAL_TO_STRING": True,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "tradingsite API",
    "DESCRIPTION": "Read-only JSON API; every list is scoped to the caller's accounts.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}
# A browser whose socket has this many pushes unacknowledged is stalled: it is
# disconnected instead of buffered for without bound.
DASHBOARD_MAX_UNACKED_PUSHES = env.int("DASHBOARD_MAX_UNACKED_PUSHES", default=40)
# Per browser, at most one price/output update per instrument per interval.
DASHBOARD_BROWSER_INTERVAL_S = env.float("DASHBOARD_BROWSER_INTERVAL_S", default=0.25)
# Several processes on one host (daphne, runfeed, celery) share counters through this
# directory; prometheus_client reads the variable itself, it is only surfaced here.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")

# How often a runtime process copies processor figures (mailbox depth, routes) into gauges.
METRICS_SAMPLE_INTERVAL_S = env.float("METRICS_SAMPLE_INTERVAL_S", default=1.0)

# processor: strategy runtime (issue 5).
# How often the route command loop's reconcile side re-reads the strategy table.
PROCESSOR_RECONCILE_INTERVAL_S = env.float("PROCESSOR_RECONCILE_INTERVAL_S", default=1.0)
# Recorded history a strategy replays before going live (kinds may ask for more, e.g. EMA).
PROCESSOR_BACKFILL_S = env.float("PROCESSOR_BACKFILL_S", default=3600.0)
# Signals are stored within this interval; outputs only the latest per strategy and
# instrument, every PROCESSOR_OUTPUT_PERSIST_INTERVAL_S.
PROCESSOR_SIGNAL_FLUSH_INTERVAL_S = env.float("PROCESSOR_SIGNAL_FLUSH_INTERVAL_S", default=0.5)
PROCESSOR_OUTPUT_PERSIST_INTERVAL_S = env.float("PROCESSOR_OUTPUT_PERSIST_INTERVAL_S", default=5.0)

# --- orders (issue 6): trade executor, brokers, ledger, reconciliation; docs/orders.md ---
# Every client order id starts "<prefix>-<account id>-"; reconciliation matches on it.
ORDERS_CLIENT_ID_PREFIX = env.str("ORDERS_CLIENT_ID_PREFIX", default="ts")
ORDERS_LOCK_TTL_S = env.float("ORDERS_LOCK_TTL_S", default=30.0)
# Must stay below the lock TTL, so an entry never outlives its lease.
ORDERS_BROKER_TIMEOUT_S = env.float("ORDERS_BROKER_TIMEOUT_S", default=10.0)
if ORDERS_BROKER_TIMEOUT_S >= ORDERS_LOCK_TTL_S:
    raise ImproperlyConfigured("ORDERS_BROKER_TIMEOUT_S must be below ORDERS_LOCK_TTL_S")
# How long the entry of a reversal (exit then opposite entry) waits for the exit to fill.
ORDERS_REVERSAL_WAIT_S = env.float("ORDERS_REVERSAL_WAIT_S", default=30.0)
ORDERS_MARKET_BUFFER_BPS = env.int("ORDERS_MARKET_BUFFER_BPS", default=50)
ORDERS_FEE_RESERVE_BPS = env.int("ORDERS_FEE_RESERVE_BPS", default=10)
ORDERS_PAPER_LATENCY_S = env.float("ORDERS_PAPER_LATENCY_S", default=0.0)
ORDERS_PAPER_TAKER_FEE_BPS = env.int("ORDERS_PAPER_TAKER_FEE_BPS", default=4)
ORDERS_PAPER_MAKER_FEE_BPS = env.int("ORDERS_PAPER_MAKER_FEE_BPS", default=2)
# Startup reconciliation (restart rebuild) per account; past it the account is DEGRADED
# and the periodic pass retries.
ORDERS_STARTUP_RECONCILE_TIMEOUT_S = env.float("ORDERS_STARTUP_RECONCILE_TIMEOUT_S", default=15.0)
# An entry whose broker outcome no read could resolve for this long is put to a person
# (dashboard panel "Orders needing a decision").
ORDERS_UNRESOLVED_PROMPT_AFTER_S = env.float("ORDERS_UNRESOLVED_PROMPT_AFTER_S", default=300.0)
# What engages an account's kill switch when reconciliation finds exposure or capital it
# cannot explain (the periodic job's wiring; the runtime injects the same callable).
ORDERS_ENTRIES_HALT = "dashboard.halts.entries_halt_by_reconciliation"
# Binance USD-M through ccxt: one key for every account on it (isolated by client-id prefix).
ORDERS_BINANCE_API_KEY = env.str("ORDERS_BINANCE_API_KEY", default="")
ORDERS_BINANCE_API_SECRET = env.str("ORDERS_BINANCE_API_SECRET", default="")
# Overrides ccxt's fapi URLs (a staging fake); empty = ccxt's live/testnet URLs.
ORDERS_BINANCE_FAPI_URL = env.str("ORDERS_BINANCE_FAPI_URL", default="")
# Upstox order API: live orders on the HFT host, reads on the API host, sandbox on its own.
ORDERS_UPSTOX_API_URL = env.str("ORDERS_UPSTOX_API_URL", default="https://api.upstox.com")
ORDERS_UPSTOX_ORDER_URL = env.str("ORDERS_UPSTOX_ORDER_URL", default="https://api-hft.upstox.com")
ORDERS_UPSTOX_SANDBOX_URL = env.str("ORDERS_UPSTOX_SANDBOX_URL", default="https://api-sandbox.upstox.com")
ORDERS_UPSTOX_PRODUCT = env.str("ORDERS_UPSTOX_PRODUCT", default="I")

# --- feeds: market data on Redis (issue 9, feeds.redispub; docs/redis-publisher.md) ----
# Off without REDIS_URL. Keys: {prefix}:{venue}:{market_type}:{symbol}:{channel}.
MARKET_DATA_PREFIX = env.str("MARKET_DATA_PREFIX", default="md")
# A key lives cadence x multiplier; cadence per "channel=s" or "venue:channel=s" override.
MARKET_DATA_TTL_MULTIPLIER = env.float("MARKET_DATA_TTL_MULTIPLIER", default=3.0)
MARKET_DATA_CADENCE_S = env.list("MARKET_DATA_CADENCE_S", default=[])
MARKET_DATA_HEARTBEAT_S = env.float("MARKET_DATA_HEARTBEAT_S", default=1.0)
MARKET_DATA_FALLBACK = env.bool("MARKET_DATA_FALLBACK", default=True)
MARKET_DATA_SWEEP_S = env.float("MARKET_DATA_SWEEP_S", default=1.0)
MARKET_DATA_FALLBACK_MIN_POLL_S = env.float("MARKET_DATA_FALLBACK_MIN_POLL_S", default=1.0)
# REST calls per minute per venue for fallback polls: a fraction of the venue's limit,
# since the order path shares this IP.
MARKET_DATA_REST_PER_MINUTE = env.float("MARKET_DATA_REST_PER_MINUTE", default=60.0)
MARKET_DATA_REST_TIMEOUT_S = env.float("MARKET_DATA_REST_TIMEOUT_S", default=10.0)
MARKET_DATA_METADATA_RETRY_S = env.float("MARKET_DATA_METADATA_RETRY_S", default=5.0)
# CONFIG SET notify-keyspace-events at start (adds "Ex"); off for a Redis that refuses CONFIG.
MARKET_DATA_KEYSPACE_NOTIFICATIONS = env.bool("MARKET_DATA_KEYSPACE_NOTIFICATIONS", default=True)

# --- feeds streams and recorder (issue 4): supervised streams, gap recovery, tick recorder; docs/streams.md ---
# A stream with no frame for this long is redialled (its gap then recovered over REST).
FEED_HEARTBEAT_TIMEOUT_S = env.float("FEED_HEARTBEAT_TIMEOUT_S", default=60.0)
FEED_HEARTBEAT_CHECK_S = env.float("FEED_HEARTBEAT_CHECK_S", default=1.0)
# Websocket keepalive: a connection with no pong within ping interval + timeout is dropped.
FEED_WS_PING_INTERVAL_S = env.float("FEED_WS_PING_INTERVAL_S", default=10.0)
FEED_WS_PING_TIMEOUT_S = env.float("FEED_WS_PING_TIMEOUT_S", default=10.0)
FEED_WS_OPEN_TIMEOUT_S = env.float("FEED_WS_OPEN_TIMEOUT_S", default=10.0)
# Planned redial age; 0 = the venue's maximum connection age less 10 minutes.
FEED_MAX_CONNECTION_AGE_S = env.float("FEED_MAX_CONNECTION_AGE_S", default=0.0)
FEED_BACKOFF_INITIAL_S = env.float("FEED_BACKOFF_INITIAL_S", default=0.5)
FEED_BACKOFF_MAX_S = env.float("FEED_BACKOFF_MAX_S", default=30.0)
FEED_BREAKER_THRESHOLD = env.int("FEED_BREAKER_THRESHOLD", default=10)
FEED_BREAKER_COOLDOWN_S = env.float("FEED_BREAKER_COOLDOWN_S", default=60.0)
# Failed gap recoveries in a row before the gap is recorded as a known hole.
FEED_RECOVERY_ATTEMPTS = env.int("FEED_RECOVERY_ATTEMPTS", default=5)
FEED_REST_TIMEOUT_S = env.float("FEED_REST_TIMEOUT_S", default=10.0)
# Share of each venue's published rate limits this process may use, and how long a call
# may wait for a token before it is refused (fail closed).
FEED_RATE_LIMIT_FRACTION = env.float("FEED_RATE_LIMIT_FRACTION", default=0.5)
FEED_RATE_LIMIT_MAX_WAIT_S = env.float("FEED_RATE_LIMIT_MAX_WAIT_S", default=5.0)
RECORDER_ENABLED = env.bool("RECORDER_ENABLED", default=True)
RECORDER_BATCH_SIZE = env.int("RECORDER_BATCH_SIZE", default=5000)
RECORDER_FLUSH_INTERVAL_S = env.float("RECORDER_FLUSH_INTERVAL_S", default=0.5)
# Ticks held in memory while the database is slow or down; beyond it they are dropped and counted.
RECORDER_CAPACITY = env.int("RECORDER_CAPACITY", default=200_000)
# On PostgreSQL the recorder's COPY runs in its own process (feeds.copy_worker), off the
# feed's GIL; off: a thread of the feed's process writes one batch at a time.
RECORDER_WRITER_PROCESS = env.bool("RECORDER_WRITER_PROCESS", default=True)
