"""Periodic jobs of the orders app."""

from __future__ import annotations

from core.jobs import periodic_job
from orders import services


@periodic_job("orders-reconcile", every_s=10.0)
def reconcile_accounts() -> str:
    return services.reconcile_accounts()
