"""Alert delivery: due alerts out through apprise, retried with full-jitter backoff.

Runs in its own job (a Celery task with beat, the in-process job runner in the embedded
default), never on the trade path: a target that refuses, hangs or errs only moves its
own alert's next attempt. Each attempt is claimed with a conditional update, so two
workers never send one alert twice at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta

import apprise
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from alerts.channels import channel_url_decrypt
from alerts.models import Alert, DeliveryState

log = logging.getLogger(__name__)

# (url, title, body) -> None when delivered, else why not (never the URL itself).
Notify = Callable[[str, str, str], str | None]

# How long one attempt holds its alert: a worker that dies mid-send frees it after this.
CLAIM_S = 120.0
BATCH = 50


def apprise_notify(url: str, title: str, body: str) -> str | None:
    """Send one notification with apprise; the reason it failed, or None."""
    notifier = apprise.Apprise()
    if not notifier.add(url):
        return "the notification URL is not understood"
    try:
        ok = notifier.notify(title=title, body=body)
    except Exception as exc:  # a plugin's own bug must not stop the other alerts
        return f"delivery raised {type(exc).__name__}"
    return None if ok else "the target refused or did not answer"


def retry_delay_s(attempts: int, *, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempts - 1))]."""
    ceiling = min(settings.ALERT_RETRY_MAX_S, settings.ALERT_RETRY_BASE_S * 2 ** max(attempts - 1, 0))
    return (rng or random).uniform(0.0, ceiling)


def _claim(alert: Alert, now: datetime) -> bool:
    return bool(
        Alert.objects.filter(pk=alert.pk, state=DeliveryState.PENDING, attempts=alert.attempts).update(
            attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=CLAIM_S)
        )
    )


def alert_deliver(
    *, alert: Alert, now: datetime, notify: Notify = apprise_notify, rng: random.Random | None = None
) -> str:
    """Make one attempt at `alert` (claimed first); return its state afterwards."""
    if not _claim(alert, now):
        return "claimed elsewhere"
    attempts = alert.attempts + 1
    try:
        url = channel_url_decrypt(alert.channel.url_ciphertext)
        error = notify(url, alert.title, alert.body)
    except Exception as exc:
        error = f"delivery could not start: {type(exc).__name__}"
    if error is None:
        Alert.objects.filter(pk=alert.pk).update(
            state=DeliveryState.DELIVERED, delivered_at=timezone.now(), last_error=""
        )
        return DeliveryState.DELIVERED
    if attempts >= settings.ALERT_MAX_ATTEMPTS:
        Alert.objects.filter(pk=alert.pk).update(state=DeliveryState.FAILED, last_error=error[:300])
        log.warning("alerts: alert %s gave up after %s attempts: %s", alert.pk, attempts, error)
        return DeliveryState.FAILED
    retry_at = now + timedelta(seconds=retry_delay_s(attempts, rng=rng))
    Alert.objects.filter(pk=alert.pk).update(next_attempt_at=retry_at, last_error=error[:300])
    return "retrying"


def alert_deliver_due(
    *, now: datetime | None = None, notify: Notify = apprise_notify, rng: random.Random | None = None
) -> dict[str, int]:
    """Attempt every pending alert that is due; count the outcomes."""
    now = now or timezone.now()
    due = list(
        Alert.objects.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now, channel__enabled=True)
        .select_related("channel")
        .order_by("next_attempt_at", "id")[:BATCH]
    )
    counts: dict[str, int] = {}
    for alert in due:
        outcome = alert_deliver(alert=alert, now=now, notify=notify, rng=rng)
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts
