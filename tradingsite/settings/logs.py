"""Logging: one console handler, plain lines, broker tokens redacted on every record.

Django applies its own DEFAULT_LOGGING before this: with DEBUG on, its "django" logger
has a console handler of its own (and "django.server" another), so each django.* record
printed twice, once past the redaction filter. Naming those loggers here replaces their
handlers: every record propagates to the one root handler and its filter.
"""

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
        # No handlers of their own: Django's defaults (console, mail_admins, django.server) would bypass the filter.
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
    },
    # Tokens never reach a log line: redacted on the console handler (defence in depth).
    "filters": {"redact_tokens": {"()": "recovery.redaction.RedactTokensFilter"}},
}
