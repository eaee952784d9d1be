"""Every signal ends in exactly one recorded outcome per account, through the real executor on the paper broker."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from dashboard.selectors import entries_halted
from dashboard.services import kill_switch_set
from feeds.market import FeedData
from orders.brokers.base import BrokerOrder, BrokerRejected, BrokerUnavailable, OrderRequest
from orders.brokers.paper import PaperBroker
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.locks import entry_scope, lock_acquire
from orders.models import AuditEvent, CapitalLedger, OrderIntent, PaperOrder, SignalOutcome
from orders.models.outcomes import Outcome
from orders.paper_matching import PaperMatcher
from orders.plans import signal_key
from processor.signals import Signal, SignalKind
from tests.orders.factories import make_setup, make_signal, make_strategy, tick

pytestmark = pytest.mark.django_db(transaction=True)


def _executor(registry: BrokerRegistry, **config: object) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(**config),  # type: ignore[arg-type]
    )


async def _outcome(signal: Signal, account_id: int | None) -> SignalOutcome:
    return await database_sync_to_async(SignalOutcome.objects.get)(signal_key=signal_key(signal), account_id=account_id)


async def _rows(signal: Signal) -> int:
    return await database_sync_to_async(SignalOutcome.objects.filter(signal_key=signal_key(signal)).count)()


class Refusing(PaperBroker):
    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        raise BrokerRejected("margin is insufficient")


class AcceptedThenTimedOut(PaperBroker):
    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        await super().place_order(request)
        raise BrokerUnavailable("read timeout")


class Broken(PaperBroker):
    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        raise ZeroDivisionError("a bug in the broker adapter")


async def test_a_placed_entry_records_placed_with_its_client_order_id(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["placed"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.PLACED and row.traded
    assert row.client_order_id == await database_sync_to_async(lambda: OrderIntent.objects.get().client_order_id)()
    assert await database_sync_to_async(AuditEvent.objects.filter(event="signal.placed").exists)()


async def test_a_signal_without_trade_setting_records_one_row_without_account(executor: TradeExecutor) -> None:
    strategy = await database_sync_to_async(make_strategy)()
    signal = make_signal(strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["no_trade_setting"]
    assert (await _outcome(signal, None)).outcome == Outcome.NO_TRADE_SETTING
    assert await _rows(signal) == 1


async def test_a_halted_account_records_halted_with_the_switch_reason(registry: BrokerRegistry) -> None:
    setup = await database_sync_to_async(make_setup)()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=lambda account_id: entries_halted(account_id=account_id),
    )
    owner = await database_sync_to_async(lambda: setup.account.owner)()
    await database_sync_to_async(kill_switch_set)(
        actor=owner, account_id=setup.account.pk, engaged=True, reason="desk closed"
    )
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["halted"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.HALTED and "desk closed" in row.reason
    assert await database_sync_to_async(PaperOrder.objects.count)() == 0


async def test_a_second_entry_while_a_position_is_open_records_position_open(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)()
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["placed"]
    second = make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50100")
    assert await executor.handle(second) == ["position_open"]
    assert (await _outcome(second, setup.account.pk)).outcome == Outcome.POSITION_OPEN
    assert await database_sync_to_async(PaperOrder.objects.count)() == 1


async def test_an_exit_with_nothing_open_records_no_position(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.EXIT_LONG)
    assert await executor.handle(signal) == ["no_position"]
    assert (await _outcome(signal, setup.account.pk)).outcome == Outcome.NO_POSITION


async def test_a_second_exit_while_the_first_works_records_already_closing(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "50100")) == ["placed"]
    again = make_signal(setup.strategy, SignalKind.EXIT_LONG, "50200")
    assert await executor.handle(again) == ["already_closing"]
    assert (await _outcome(again, setup.account.pk)).outcome == Outcome.ALREADY_CLOSING
    assert await database_sync_to_async(PaperOrder.objects.filter(side="SELL").count)() == 1


async def test_the_same_signal_twice_keeps_its_placed_row_and_audits_the_duplicate(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["placed"]
    assert await executor.handle(signal) == ["duplicate"]
    assert (await _outcome(signal, setup.account.pk)).outcome == Outcome.PLACED
    assert await _rows(signal) == 1
    assert await database_sync_to_async(AuditEvent.objects.filter(event="signal.duplicate").exists)()


async def test_a_quantity_below_the_lot_records_quantity_zero(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.0004")  # lot 0.001
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["quantity_zero"]
    assert (await _outcome(signal, setup.account.pk)).outcome == Outcome.QUANTITY_ZERO


async def test_an_entry_beyond_available_capital_records_insufficient_capital(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)(capital="100")
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["insufficient_capital"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.INSUFFICIENT_CAPITAL and row.reason
    assert not await database_sync_to_async(OrderIntent.objects.exists)()


async def test_a_lease_held_past_its_ttl_records_lock_timeout(registry: BrokerRegistry) -> None:
    setup = await database_sync_to_async(make_setup)()
    # Another owner holds the lease far longer than this executor's TTL allows.
    assert await database_sync_to_async(lock_acquire)(
        account_id=setup.account.pk, scope=entry_scope(setup.instrument.pk), owner="someone-else", ttl_s=600
    )
    executor = _executor(registry, lock_ttl_s=0.2, lock_wait_margin_s=0.1, broker_timeout_s=0.1)
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["lock_timeout"]
    assert (await _outcome(signal, setup.account.pk)).outcome == Outcome.LOCK_TIMEOUT
    assert await database_sync_to_async(PaperOrder.objects.count)() == 0


async def test_an_account_on_an_unconfigured_broker_records_broker_not_configured(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)(broker="binance-usdm", mode="live")
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["broker_not_configured"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.BROKER_NOT_CONFIGURED and "binance-usdm" in row.reason


async def test_a_refused_order_records_broker_rejected_and_releases_the_reservation() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = Refusing(account_key=str(setup.account.pk))
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["broker_rejected"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.BROKER_REJECTED and "margin" in row.reason
    assert await database_sync_to_async(lambda: CapitalLedger.objects.get().reserved_for_orders)() == 0


async def test_a_lost_broker_answer_records_unknown_keeps_the_reservation_and_marks_the_intent() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = AcceptedThenTimedOut(account_key=str(setup.account.pk))
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["unknown"]
    row = await _outcome(signal, setup.account.pk)
    intent = await database_sync_to_async(OrderIntent.objects.get)()
    assert row.outcome == Outcome.UNKNOWN and row.client_order_id == intent.client_order_id
    assert intent.state == OrderIntent.State.PENDING and intent.unresolved_since is not None
    assert await database_sync_to_async(lambda: CapitalLedger.objects.get().reserved_for_orders)() == intent.reserved
    assert await database_sync_to_async(lambda: ledger_check(account_id=setup.account.pk).ok)()


async def test_an_unexpected_error_records_failed_with_the_error_and_the_order_id() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = Broken(account_key=str(setup.account.pk))
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["failed"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.FAILED and "ZeroDivisionError" in row.reason
    assert row.client_order_id == await database_sync_to_async(lambda: OrderIntent.objects.get().client_order_id)()


async def test_each_account_of_a_signal_gets_its_own_outcome(executor: TradeExecutor) -> None:
    rich = await database_sync_to_async(make_setup)(capital="10000")
    poor = await database_sync_to_async(make_setup)(capital="10", strategy=rich.strategy)
    signal = make_signal(rich.strategy, SignalKind.ENTRY_LONG)
    assert sorted(await executor.handle(signal)) == ["insufficient_capital", "placed"]
    assert (await _outcome(signal, rich.account.pk)).outcome == Outcome.PLACED
    assert (await _outcome(signal, poor.account.pk)).outcome == Outcome.INSUFFICIENT_CAPITAL
    assert await _rows(signal) == 2


async def test_outcomes_keep_counting_in_the_entries_and_exits_metrics(executor: TradeExecutor) -> None:
    from orders.metrics import ENTRIES, EXITS

    setup = await database_sync_to_async(make_setup)()
    placed_before = ENTRIES.labels("placed")._value.get()
    no_position_before = EXITS.labels("no_position")._value.get()
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["placed"]
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_SHORT)) == ["no_position"]
    assert ENTRIES.labels("placed")._value.get() == placed_before + 1
    assert EXITS.labels("no_position")._value.get() == no_position_before + 1


async def test_an_instrument_whose_metadata_the_venue_has_not_confirmed_records_no_metadata(
    executor: TradeExecutor,
) -> None:
    from tests.orders.factories import make_instrument

    instrument = await database_sync_to_async(make_instrument)("bin", "BTCUSDT", venue="binance-usdm")
    setup = await database_sync_to_async(make_setup)(instrument=instrument)
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG, feed="bin")
    assert await executor.handle(signal) == ["no_metadata"]
    row = await _outcome(signal, setup.account.pk)
    assert row.outcome == Outcome.NO_METADATA and "BTCUSDT metadata not known" in row.reason
    assert not await database_sync_to_async(OrderIntent.objects.exists)()
