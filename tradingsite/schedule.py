"""The periodic jobs of this site, declared once (the mechanism is core.schedule).

Installed into core.schedule when Django starts (tradingsite.apps); Celery beat and the
embedded site's in-process runner both read it from there.
"""
from __future__ import annotations

from core.schedule import PeriodicJob

PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("clear-expired-sessions", "tradingsite.tasks.clear_expired_sessions", 3600.0),
    PeriodicJob("prune-component-health", "tradingsite.tasks.prune_component_health", 600.0),
    PeriodicJob("recovery-token-expiry", "recovery.tasks.expire_broker_tokens", 60.0),
    PeriodicJob("refresh-instrument-metadata", "feeds.tasks.instrument_metadata_refresh", 3600.0),
    PeriodicJob("orders-reconcile", "orders.tasks.reconcile_accounts", 10.0),
)
