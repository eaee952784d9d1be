"""Trade events to the owner's dashboards (group `user.<owner_id>`), after commit only."""
from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from tradingsite.consumers import user_group

log = logging.getLogger(__name__)

# Relayed by tradingsite.consumers.DashboardConsumer.orders_trade.
TRADE_EVENT = "orders.trade"


def push_trade_event_rollback_unsafe(owner_id: int, event: dict[str, Any]) -> None:
    """Send now; a failed push is logged, the database keeps the truth."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(owner_id), {"type": TRADE_EVENT, **event})
    except Exception:  # a dashboard that misses a push catches up on reload
        log.warning("orders: trade event push to user %s failed", owner_id, exc_info=True)


def push_trade_event_on_commit(owner_id: int, event: dict[str, Any]) -> None:
    """Push after the surrounding transaction commits, so a rolled-back trade is never shown."""
    transaction.on_commit(lambda: push_trade_event_rollback_unsafe(owner_id, event))
