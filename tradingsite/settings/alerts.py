"""Alert delivery: how often a failed delivery is retried, and how far apart."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env

# Attempts per alert before it is marked failed (the history shows the last error).
ALERT_MAX_ATTEMPTS = env.int("ALERT_MAX_ATTEMPTS", default=6)
# Full-jitter backoff: attempt n waits uniform [0, min(max, base * 2**(n-1))] seconds.
ALERT_RETRY_BASE_S = env.float("ALERT_RETRY_BASE_S", default=5.0)
ALERT_RETRY_MAX_S = env.float("ALERT_RETRY_MAX_S", default=300.0)
if ALERT_MAX_ATTEMPTS < 1 or not 0 < ALERT_RETRY_BASE_S <= ALERT_RETRY_MAX_S:
    raise ImproperlyConfigured("ALERT_MAX_ATTEMPTS >= 1 and 0 < ALERT_RETRY_BASE_S <= ALERT_RETRY_MAX_S")
