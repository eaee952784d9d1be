"""Periodic housekeeping of the site (see tradingsite.schedule for the cadence)."""
from __future__ import annotations

from datetime import timedelta

from tradingsite import services
from tradingsite.jobs import periodic_job


@periodic_job("clear-expired-sessions")
def clear_expired_sessions() -> int:
    return services.sessions_clear_expired()


@periodic_job("prune-component-health")
def prune_component_health() -> int:
    return services.component_health_prune(older_than=timedelta(hours=1))
