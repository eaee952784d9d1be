"""A manual close racing the strategy's own exit (two executors, as the web and the runtime process) never oversells."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.db.models import Sum

from feeds.market import FeedData
from orders import manual
from orders.brokers.paper import PaperExchange
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.manual import ManualDesk
from orders.models import Order, Position
from orders.paper_matching import PaperMatcher
from processor.signals import SignalKind
from tests.orders.factories import make_setup, make_signal, tick

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.needs_postgres]

ROUNDS = 3


def _exit_quantity(account_id: int) -> int:
    return int(
        Order.objects.filter(account_id=account_id, intent="EXIT").aggregate(total=Sum("quantity"))["total"] or 0
    )


async def test_a_manual_close_racing_a_strategy_exit_closes_the_position_exactly_once(
    registry: BrokerRegistry, executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    web_registry = BrokerRegistry(on_paper_place=matcher.order_placed)
    web = TradeExecutor(
        broker_for=lambda plan: web_registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
    desk = ManualDesk(executor=web, registry=web_registry)
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    owner = await database_sync_to_async(lambda: setup.account.owner)()
    for n in range(ROUNDS):
        assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
        await matcher.consume(FeedData("sim", (tick("100", "50"),)))
        position = await database_sync_to_async(Position.objects.get)(account=setup.account, state="OPEN")

        strategy_exit, manual_close = await asyncio.gather(
            executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100")),
            manual.position_close(user=owner, position_id=position.pk, desk=desk),
        )
        outcomes = sorted([strategy_exit[0], manual_close.outcome])
        assert outcomes in (["already_closing", "placed"], ["no_position", "placed"]), (n, outcomes)
        await matcher.consume(FeedData("sim", (tick("100", "50"),)))

        position = await database_sync_to_async(Position.objects.get)(pk=position.pk)
        assert position.state == "CLOSED" and position.quantity == 0
        assert await database_sync_to_async(_exit_quantity)(setup.account.pk) == (n + 1) * 10**12
    broker_net = await database_sync_to_async(PaperExchange(account_key=str(setup.account.pk)).positions)()
    assert broker_net == []  # bought and sold the same: flat at the broker
    assert (await database_sync_to_async(ledger_check)(account_id=setup.account.pk)).ok
