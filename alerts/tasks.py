"""Periodic jobs of the alerts app (Celery tasks with beat; the in-process runner embedded)."""

from __future__ import annotations

from alerts.collect import alert_collect
from alerts.delivery import alert_deliver_due
from core.jobs import periodic_job


@periodic_job("alerts-collect", every_s=5.0)
def collect_alerts() -> str:
    counts = alert_collect()
    return ", ".join(f"{n} {name}" for name, n in counts.items())


@periodic_job("alerts-deliver", every_s=5.0)
def deliver_alerts() -> str:
    counts = alert_deliver_due()
    return ", ".join(f"{n} {state}" for state, n in counts.items()) or "nothing due"
