"""Periodic jobs of the orders app (cadence in tradingsite.schedule)."""
from __future__ import annotations

from orders import services
from core.jobs import periodic_job


@periodic_job("orders-reconcile")
def reconcile_accounts() -> str:
    return services.reconcile_accounts()
