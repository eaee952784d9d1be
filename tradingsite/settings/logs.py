"""Logging: one console handler, plain lines, broker tokens redacted."""

from __future__ import annotations

from typing import Any

from tradingsite.settings.base import env

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact_tokens"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
    },
    # Tokens never reach a log line: redacted on the console handler (defence in depth).
    "filters": {"redact_tokens": {"()": "recovery.redaction.RedactTokensFilter"}},
}
