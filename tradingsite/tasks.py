"""Periodic housekeeping of the site: session expiry and the pruning of old health rows."""

from __future__ import annotations

from datetime import timedelta

from core import services as health_services
from core.expected import expected_components
from core.jobs import periodic_job
from tradingsite import services


@periodic_job("clear-expired-sessions", every_s=3600.0)
def clear_expired_sessions() -> int:
    return services.sessions_clear_expired()


@periodic_job("prune-component-health", every_s=600.0)
def prune_component_health() -> int:
    # The last report of an enabled feed or a scheduled job stays, however old: it is
    # the evidence that the component is dead.
    expected = [e.component for e in expected_components()]
    return health_services.component_health_prune(older_than=timedelta(hours=1), expected=expected)
