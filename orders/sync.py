"""Bring one order in line with the broker: its fills first, then its status."""

from __future__ import annotations

from datetime import timedelta

from channels.db import database_sync_to_async

from orders import lifecycle
from orders.brokers.base import Broker, OrderNotFound
from orders.models import Order

# Fills are listed from a little before the order's creation: venue and site clocks differ.
FILL_LOOKBACK = timedelta(minutes=5)


async def order_sync(
    *, broker: Broker, account_id: int, order: Order, symbol: str, via_reconciliation: bool = False
) -> None:
    """Apply the broker's fills of `order` not yet applied, then its ended/working status."""
    try:
        report = await broker.fetch_order(client_order_id=order.client_order_id, symbol=symbol)
    except OrderNotFound:
        return
    since_ns = int((order.created_at - FILL_LOOKBACK).timestamp() * 1e9)
    fills = await broker.fills(symbols=[report.symbol], since_ns=since_ns)
    applied = 0
    for fill in fills:
        if fill.exchange_order_id == order.exchange_order_id:
            if await database_sync_to_async(lifecycle.lifecycle_apply_fill)(
                account_id=account_id, fill=fill, via_reconciliation=via_reconciliation
            ):
                applied += 1
    filled = await database_sync_to_async(
        lambda: Order.objects.values_list("filled_quantity", flat=True).get(pk=order.pk)
    )()
    if filled == report.filled_quantity:
        await database_sync_to_async(lifecycle.lifecycle_order_update)(
            account_id=account_id, broker_order=report, via_reconciliation=via_reconciliation
        )
