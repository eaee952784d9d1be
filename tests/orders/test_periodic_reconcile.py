"""The orders-reconcile job, run the way the embedded site runs it (Channels' database thread)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from core.models import ComponentHealth
from orders.brokers.base import OrderRequest
from orders.brokers.paper import PaperBroker
from orders.lifecycle import intent_create
from orders.models import Order
from orders.tasks import reconcile_accounts
from tests.orders.factories import make_setup, market_entry_spec

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_periodic_job_adopts_an_orphan_from_the_database_thread() -> None:
    setup = await database_sync_to_async(make_setup)()
    spec = market_entry_spec(setup, f"ts-{setup.account.pk}-orphan0000000001")
    await database_sync_to_async(intent_create)(spec=spec)
    await PaperBroker(account_key=str(setup.account.pk)).place_order(
        OrderRequest(spec.client_order_id, "BTCUSDT", "BUY", "MARKET", spec.quantity, None)
    )
    summary = await database_sync_to_async(reconcile_accounts)()
    assert "1 corrections" in summary
    assert await database_sync_to_async(Order.objects.filter(client_order_id=spec.client_order_id).exists)()
    health = await database_sync_to_async(ComponentHealth.objects.get)(component="job:orders-reconcile")
    assert health.status == "HEALTHY"


async def test_a_ledger_that_does_not_add_up_turns_the_job_degraded() -> None:
    from orders.models import CapitalLedger
    from orders.services import CapitalInvariantViolated

    setup = await database_sync_to_async(make_setup)()
    # A write that bypassed the ledger service: the journal no longer explains the field.
    await database_sync_to_async(CapitalLedger.objects.filter(account=setup.account).update)(reserved_for_orders=5)
    with pytest.raises(CapitalInvariantViolated):
        await database_sync_to_async(reconcile_accounts)()
    health = await database_sync_to_async(ComponentHealth.objects.get)(component="job:orders-reconcile")
    assert health.status == "DEGRADED" and "reserved_for_orders" in health.reason
