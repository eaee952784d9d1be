"""Entry signals of different strategies queued together: one batch, each signal keeping its own decision and outcome."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import AuditEvent, CapitalLedger, EntryLock, OrderIntent, Position, SignalOutcome, TradeSetting
from orders.plans import signal_key
from processor.signals import Signal, SignalKind
from tests.orders.factories import make_instrument, make_setup, make_signal, make_strategy

pytestmark = pytest.mark.django_db(transaction=True)


class _Tally(dict[str, int]):
    """The executor's outcome counts; `done` once `target` signals are decided."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target
        self.done = asyncio.Event()

    def __setitem__(self, name: str, count: int) -> None:
        super().__setitem__(name, count)
        if sum(self.values()) >= self.target:
            self.done.set()


def _setups() -> dict[str, object]:
    btc = make_instrument(symbol="BTCUSDT")
    eth = make_instrument(symbol="ETHUSDT")
    # One account, two instruments, and a second strategy on the first instrument.
    first = make_setup(instrument=btc)
    on_eth = make_strategy()
    TradeSetting.objects.create(strategy=on_eth, account=first.account, quantity=Decimal("0.01"), mode="paper")
    rival = make_strategy()
    TradeSetting.objects.create(strategy=rival, account=first.account, quantity=Decimal("0.01"), mode="paper")
    # An account with capital for one entry of 0.01 at 50000 only, trading two instruments.
    tight = make_setup(instrument=btc, capital="800")
    tight_eth = make_strategy()
    TradeSetting.objects.create(strategy=tight_eth, account=tight.account, quantity=Decimal("0.01"), mode="paper")
    other = make_setup(instrument=btc)
    return {
        "first": first,
        "on_eth": on_eth,
        "rival": rival,
        "tight": tight,
        "tight_eth": tight_eth,
        "other": other,
        "eth": eth,
        "orphan": make_strategy(),  # no trade setting
    }


async def test_signals_queued_together_are_one_batch_and_each_keeps_its_own_outcome(registry: BrokerRegistry) -> None:
    s = await database_sync_to_async(_setups)()
    first, tight, other = s["first"], s["tight"], s["other"]
    signals: list[Signal] = [
        make_signal(first.strategy, SignalKind.ENTRY_LONG),
        make_signal(s["on_eth"], SignalKind.ENTRY_LONG, symbol="ETHUSDT"),
        make_signal(s["rival"], SignalKind.ENTRY_LONG),
        make_signal(tight.strategy, SignalKind.ENTRY_LONG),
        make_signal(s["tight_eth"], SignalKind.ENTRY_LONG, symbol="ETHUSDT"),
        make_signal(other.strategy, SignalKind.ENTRY_LONG),
        make_signal(s["orphan"], SignalKind.ENTRY_LONG),
    ]
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
    tally = executor.outcomes = _Tally(len(signals))
    queue: asyncio.Queue[Signal] = asyncio.Queue()
    for signal in signals:
        queue.put_nowait(signal)
    runner = asyncio.create_task(executor.run(queue))
    await asyncio.wait_for(tally.done.wait(), 30)
    runner.cancel()

    def state() -> dict[str, object]:
        outcome = {
            (row.signal_key, row.account_id): row.outcome
            for row in SignalOutcome.objects.filter(signal_key__in=[signal_key(x) for x in signals])
        }
        return {
            "outcomes": [
                sorted(o for (key, _), o in outcome.items() if key == signal_key(signal)) for signal in signals
            ],
            "no_setting": SignalOutcome.objects.filter(
                signal_key=signal_key(signals[6]), account_id__isnull=True, outcome="no_trade_setting"
            ).count(),
            "positions": sorted(
                Position.objects.filter(state="OPEN").values_list("account_id", "instrument_id").order_by()
            ),
            "intent_times": set(OrderIntent.objects.values_list("created_at", flat=True)),
            "audits": AuditEvent.objects.filter(event="signal.placed").count(),
            "checks": [
                ledger_check(account_id=a).problems for a in CapitalLedger.objects.values_list("account_id", flat=True)
            ],
            "leases": EntryLock.objects.exclude(owner="").count(),
        }

    got = await database_sync_to_async(state)()
    outcomes = got["outcomes"]
    assert outcomes[1] == ["placed"] and outcomes[5] == ["placed"]
    # One active entry per account and instrument across strategies: one of the two placed.
    assert sorted([*outcomes[0], *outcomes[2]]) == ["placed", "position_open"]
    assert outcomes[0] == ["placed"]  # the earlier signal wins
    # Capital for one entry: the batch's second entry on the account sees what the first took.
    assert outcomes[3] == ["placed"] and outcomes[4] == ["insufficient_capital"]
    assert got["no_setting"] == 1
    btc, eth = first.instrument.pk, s["eth"].pk
    a, t, o = first.account.pk, tight.account.pk, other.account.pk
    assert got["positions"] == sorted([(a, btc), (a, eth), (t, btc if "placed" in outcomes[3] else eth), (o, btc)])
    assert got["audits"] == 4
    assert got["checks"] == [()] * 3
    assert got["leases"] == 0
    # Reserved together: the placed intents were written by one statement.
    assert len(got["intent_times"]) <= 2
    assert sum(executor.outcomes.values()) == 7
