"""An entry's pushes reach its owner's dashboard after each commit, in commit order."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from processor.signals import SignalKind
from tests.dashboard.test_socket import connect, trader
from tests.orders.factories import make_instrument, make_signal, make_strategy

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_entry_shows_in_flight_then_its_order_then_placed_and_nothing_to_anyone_else() -> None:
    strategy = await database_sync_to_async(make_strategy)("ema-entry-pushes")
    await database_sync_to_async(make_instrument)()
    _, alice_cookie = await trader("alice", strategy)
    _, carol_cookie = await trader("carol")
    registry = BrokerRegistry()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
    alice, carol = await connect(alice_cookie), await connect(carol_cookie)
    try:
        signal = make_signal(strategy, SignalKind.ENTRY_LONG, "100")
        assert await executor.handle(signal) == ["placed"]
        pushes = [await alice.receive_json_from(timeout=5) for _ in range(3)]
        seen = [(push["type"], push.get("outcome") or push.get("event")) for push in pushes]
        assert seen == [("signal.outcome", "in_flight"), ("trade", "order"), ("signal.outcome", "placed")]
        assert {push["client_order_id"] for push in pushes} == {pushes[2]["client_order_id"]}
        assert pushes[2]["output_id"] == signal.output_id and pushes[2]["account_name"] == "main"
        assert await carol.receive_nothing(timeout=0.5)
    finally:
        await alice.disconnect()
        await carol.disconnect()
