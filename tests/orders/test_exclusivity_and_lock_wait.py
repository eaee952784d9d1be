"""One active entry per account and instrument across strategies; the entry-lease loser waits and re-checks."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from feeds.market import FeedData
from orders.brokers.registry import BrokerRegistry
from orders.client_ids import client_order_id
from orders.executor import ExecutorConfig, TradeExecutor
from orders.lifecycle import IntentSpec, intent_create
from orders.locks import entry_scope, lock_acquire
from orders.models import EntryLock, PaperOrder, Position, SignalOutcome, TradeSetting
from orders.models.outcomes import Outcome
from orders.paper_matching import PaperMatcher
from orders.plans import signal_key
from processor.signals import SignalHub, SignalKind
from tests.helpers import async_eventually
from tests.orders.factories import Setup, make_setup, make_signal, make_strategy, tick

pytestmark = pytest.mark.django_db(transaction=True)


def _executor(registry: BrokerRegistry, **config: object) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(**config),  # type: ignore[arg-type]
    )


def _second_strategy_on(setup: Setup) -> TradeSetting:
    return TradeSetting.objects.create(
        strategy=make_strategy(), account=setup.account, quantity=Decimal("0.01"), mode="paper"
    )


async def test_two_strategies_on_one_account_and_instrument_hold_one_position(registry: BrokerRegistry) -> None:
    setup = await database_sync_to_async(make_setup)()
    other = await database_sync_to_async(_second_strategy_on)(setup)
    other_strategy = await database_sync_to_async(lambda: other.strategy)()
    executor = _executor(registry)
    hub = SignalHub()
    runner = asyncio.create_task(executor.run(hub.subscribe("trade-executor")))
    try:
        signals = [
            make_signal(setup.strategy, SignalKind.ENTRY_LONG),
            make_signal(other_strategy, SignalKind.ENTRY_LONG),
        ]
        hub.publish(signals)

        async def both_decided() -> bool:
            return sum(executor.outcomes.values()) == 2

        await async_eventually(both_decided)
    finally:
        runner.cancel()
    assert executor.outcomes == {"placed": 1, "position_open": 1}
    assert await database_sync_to_async(Position.objects.filter(account=setup.account, state="OPEN").count)() == 1
    assert await database_sync_to_async(PaperOrder.objects.count)() == 1
    outcomes = await database_sync_to_async(
        lambda: sorted(SignalOutcome.objects.filter(account=setup.account).values_list("outcome", flat=True))
    )()
    assert outcomes == [Outcome.PLACED, Outcome.POSITION_OPEN]


async def test_another_strategys_open_position_blocks_an_opposite_entry_without_a_reversal_wait(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)()
    other = await database_sync_to_async(_second_strategy_on)(setup)
    other_strategy = await database_sync_to_async(lambda: other.strategy)()
    executor = _executor(registry, reversal_wait_s=600)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    assert await executor.handle(make_signal(other_strategy, SignalKind.ENTRY_SHORT)) == ["position_open"]


async def test_the_loser_takes_over_a_lease_that_expires_and_places(registry: BrokerRegistry) -> None:
    setup = await database_sync_to_async(make_setup)()
    # A process that died holding the lease: it is never released, only expires.
    assert await database_sync_to_async(lock_acquire)(
        account_id=setup.account.pk, scope=entry_scope(setup.instrument.pk), owner="dead-process", ttl_s=0.5
    )
    executor = _executor(registry, lock_ttl_s=0.5, lock_wait_margin_s=5.0, broker_timeout_s=0.4)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["placed"]
    lock = await database_sync_to_async(EntryLock.objects.get)(account=setup.account)
    assert lock.owner == ""  # taken over, then released by its new owner


async def test_the_loser_re_checks_after_the_takeover_and_refuses_what_the_holder_did(registry: BrokerRegistry) -> None:
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await database_sync_to_async(lock_acquire)(
        account_id=setup.account.pk, scope=entry_scope(setup.instrument.pk), owner="other-process", ttl_s=0.5
    )
    # The holder reserved this very signal's entry before it died.
    cid = client_order_id(prefix="ts", account_id=setup.account.pk, signal_key=signal_key(signal))
    await database_sync_to_async(intent_create)(
        spec=IntentSpec(
            client_order_id=cid,
            account_id=setup.account.pk,
            strategy_id=setup.strategy.pk,
            instrument_id=setup.instrument.pk,
            intent="ENTRY",
            position_side="LONG",
            side="BUY",
            order_type="MARKET",
            quantity=1_000_000,
            price=5_000_000_000_000,
            reserve=0,
        )
    )
    executor = _executor(registry, lock_ttl_s=0.5, lock_wait_margin_s=5.0, broker_timeout_s=0.4)
    assert await executor.handle(signal) == ["duplicate"]
    assert await database_sync_to_async(PaperOrder.objects.count)() == 0
