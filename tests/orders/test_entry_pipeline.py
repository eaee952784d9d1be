"""Signals handled at once on the same accounts: order, exclusivity and the kill switch hold.

The executor handles every queued signal concurrently (one task each); signals of
different instruments on the same accounts overlap, while one active entry per
account and instrument holds across them, and the kill switch is read inside each
reserve transaction, so a switch engaged after the plan read still halts the entry.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest
from channels.db import database_sync_to_async

from dashboard.selectors import entries_halted, entries_halted_many
from dashboard.services import kill_switch_set
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import Account, EntryLock, Order, OrderIntent, SignalOutcome, TradeSetting
from orders.plans import TradePlan, signal_key
from processor.models import Strategy
from processor.signals import Signal, SignalHub, SignalKind
from tests.orders.factories import make_instrument, make_setup, make_signal, make_strategy

pytestmark = pytest.mark.django_db(transaction=True)


def _executor(registry: BrokerRegistry, **kwargs: object) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=lambda account_id: entries_halted(account_id=account_id),
        entry_gate_many=lambda account_ids: entries_halted_many(account_ids=account_ids),
        **kwargs,  # type: ignore[arg-type]
    )


@dataclass
class World:
    accounts: list[Account]
    strategies: list[Strategy]  # strategy i trades symbol SYM<i> on every account
    symbols: list[str]


def _world(accounts: int, instruments: int) -> World:
    symbols = [f"SYM{i}" for i in range(instruments)]
    strategies = [make_strategy() for _ in symbols]
    for symbol in symbols:
        make_instrument(symbol=symbol)
    setups = [make_setup(strategy=strategies[0], instrument=make_instrument(symbol=symbols[0]))]
    for _ in range(accounts - 1):
        setups.append(make_setup(strategy=strategies[0], instrument=make_instrument(symbol=symbols[0])))
    owned = [setup.account for setup in setups]
    for strategy in strategies[1:]:
        for account in owned:
            TradeSetting.objects.create(strategy=strategy, account=account, quantity="0.01", mode="paper")
    return World(owned, strategies, symbols)


def _outcomes(signal: Signal) -> dict[int | None, str]:
    return {row.account_id: row.outcome for row in SignalOutcome.objects.filter(signal_key=signal_key(signal))}


def _clean(account_ids: list[int]) -> dict[str, object]:
    return {
        "pending": OrderIntent.objects.filter(account_id__in=account_ids, state=OrderIntent.State.PENDING).count(),
        "held_leases": EntryLock.objects.filter(account_id__in=account_ids).exclude(owner="").count(),
        "problems": [problem for a in account_ids for problem in ledger_check(account_id=a).problems],
    }


async def _drain(executor: TradeExecutor, signals: list[Signal], expected: int) -> None:
    hub = SignalHub()
    queue = hub.subscribe("trade-executor", capacity=1000)
    runner = asyncio.create_task(executor.run(queue))
    hub.publish(signals)
    try:
        for _ in range(1000):
            if sum(executor.outcomes.values()) >= expected:
                break
            await asyncio.sleep(0.01)
    finally:
        runner.cancel()
    assert sum(executor.outcomes.values()) == expected, executor.outcomes


async def test_signals_of_different_instruments_on_the_same_accounts_all_place_with_the_ledgers_consistent(
    registry: BrokerRegistry,
) -> None:
    world = await database_sync_to_async(_world)(3, 4)
    ids = [account.pk for account in world.accounts]
    executor = _executor(registry)
    signals = [
        make_signal(strategy, SignalKind.ENTRY_LONG, symbol=symbol)
        for strategy, symbol in zip(world.strategies, world.symbols)
    ]

    await _drain(executor, signals, len(signals) * len(ids))

    assert executor.outcomes == {"placed": 12}
    for signal in signals:
        assert await database_sync_to_async(_outcomes)(signal) == dict.fromkeys(ids, "placed")
    assert await database_sync_to_async(lambda: Order.objects.filter(account_id__in=ids).count())() == 12
    assert await database_sync_to_async(_clean)(ids) == {"pending": 0, "held_leases": 0, "problems": []}


async def test_concurrent_entries_of_two_strategies_on_one_account_and_instrument_place_one(
    registry: BrokerRegistry,
) -> None:
    """Exclusivity per (account, instrument) across strategies, whichever signal the database takes first."""

    def two_strategies() -> tuple[Account, Strategy, Strategy]:
        first = make_setup()
        second = make_strategy()
        TradeSetting.objects.create(strategy=second, account=first.account, quantity="0.01", mode="paper")
        return first.account, first.strategy, second

    account, one, other = await database_sync_to_async(two_strategies)()
    executor = _executor(registry)
    signals = [make_signal(one, SignalKind.ENTRY_LONG), make_signal(other, SignalKind.ENTRY_LONG)]

    await _drain(executor, signals, 2)

    assert sorted(executor.outcomes.items()) == [("placed", 1), ("position_open", 1)]
    rows = [await database_sync_to_async(_outcomes)(signal) for signal in signals]
    assert sorted(row[account.pk] for row in rows) == ["placed", "position_open"]
    assert await database_sync_to_async(lambda: Order.objects.filter(account=account).count())() == 1
    assert await database_sync_to_async(_clean)([account.pk]) == {"pending": 0, "held_leases": 0, "problems": []}


async def test_queued_signals_of_one_strategy_and_symbol_keep_their_order_on_each_account(
    registry: BrokerRegistry,
) -> None:
    """An entry, its exit and the next entry, queued at once: handled in that order on every account."""
    world = await database_sync_to_async(_world)(2, 1)
    ids = [account.pk for account in world.accounts]
    executor = _executor(registry)
    strategy, symbol = world.strategies[0], world.symbols[0]
    entry = make_signal(strategy, SignalKind.ENTRY_LONG, symbol=symbol)
    again = make_signal(strategy, SignalKind.ENTRY_LONG, symbol=symbol)

    await _drain(executor, [entry, again], 4)

    assert await database_sync_to_async(_outcomes)(entry) == dict.fromkeys(ids, "placed")
    # The second entry is decided after the first committed: its position (or working entry) blocks it.
    assert await database_sync_to_async(_outcomes)(again) == dict.fromkeys(ids, "position_open")
    assert await database_sync_to_async(_clean)(ids) == {"pending": 0, "held_leases": 0, "problems": []}


async def test_a_kill_switch_engaged_after_the_plan_read_halts_the_entries(registry: BrokerRegistry) -> None:
    """A concurrent write landing between the plan read and the reserve transaction: the gate is read in the latter."""
    world = await database_sync_to_async(_world)(3, 1)
    ids = [account.pk for account in world.accounts]
    halted_one = world.accounts[1]
    engaged = threading.Event()

    def engage() -> None:
        kill_switch_set(actor=halted_one.owner, account_id=halted_one.pk, engaged=True, reason="late")
        engaged.set()

    def broker_for(plan: TradePlan):  # type: ignore[no-untyped-def]
        # Called on the loop between the plan read and the reserve: another process's
        # write, simulated by a thread of its own that commits before the reserve starts.
        if not engaged.is_set():
            writer = threading.Thread(target=engage)
            writer.start()
            writer.join()
        return registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode)

    executor = TradeExecutor(
        broker_for=broker_for,
        config=ExecutorConfig(),
        entry_gate_many=lambda account_ids: entries_halted_many(account_ids=account_ids),
    )
    signal = make_signal(world.strategies[0], SignalKind.ENTRY_LONG, symbol=world.symbols[0])

    outcomes = await executor.handle(signal)

    assert outcomes == ["placed", "halted", "placed"]
    assert (await database_sync_to_async(_outcomes)(signal))[halted_one.pk] == "halted"
    assert await database_sync_to_async(_clean)(ids) == {"pending": 0, "held_leases": 0, "problems": []}


def test_the_batched_gate_answers_as_the_gate_per_account() -> None:
    world = _world(3, 1)
    ids = [account.pk for account in world.accounts]
    assert entries_halted_many(account_ids=ids) == dict.fromkeys(ids)
    kill_switch_set(actor=world.accounts[0].owner, account_id=ids[0], engaged=True, reason="one")
    assert entries_halted_many(account_ids=ids) == {a: entries_halted(account_id=a) for a in ids}
    assert entries_halted_many(account_ids=ids)[ids[1]] is None
    staff = world.accounts[2].owner
    staff.is_staff = staff.is_superuser = True
    staff.save()
    kill_switch_set(actor=staff, account_id=None, engaged=True, reason="everyone")
    many = entries_halted_many(account_ids=ids)
    assert many == {a: entries_halted(account_id=a) for a in ids}
    assert all(reason and "global" in reason for reason in many.values())
