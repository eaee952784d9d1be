"""Risk limits: exit levels (pure), a stop-loss fired on the paper exchange by the tick watcher,
the open-positions limit and the daily loss limit in the entry gate, and the kill switch the loss engages."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fixed_point import SCALE
from dashboard.halts import entries_halt_by_risk_limit
from dashboard.manual_control import site_entry_gate, site_entry_gate_many
from dashboard.models import ControlAudit, KillSwitch
from feeds.market import FeedData
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import Account, AuditEvent, Position, SignalOutcome, TradeSetting
from orders.paper_matching import PaperMatcher
from orders.risk_limits import ExitLevels, exit_trigger, limits_forget
from orders.risk_watch import RiskWatcher
from processor.signals import SignalKind
from tests.orders.factories import make_instrument, make_setup, make_signal, tick

P = SCALE  # one unit of price


def levels(sl: str | None = None, tp: str | None = None, trail: str | None = None) -> ExitLevels:
    return ExitLevels.from_percent(*(Decimal(v) if v else None for v in (sl, tp, trail)))


@pytest.mark.parametrize(
    ("side", "price", "best", "expected"),
    [
        ("LONG", 99 * P, 100 * P, "stop_loss"),  # 1 % below the entry
        ("LONG", 99 * P + 1, 100 * P, None),
        ("LONG", 102 * P, 102 * P, "take_profit"),
        ("LONG", 101 * P, 101 * P, None),
        ("SHORT", 101 * P, 100 * P, "stop_loss"),
        ("SHORT", 98 * P, 98 * P, "take_profit"),
        ("SHORT", 100 * P, 100 * P, None),
    ],
)
def test_stop_and_target_levels(side: str, price: int, best: int, expected: str | None) -> None:
    found = exit_trigger(side=side, entry_price=100 * P, best_price=best, price=price, levels=levels("1", "2"))
    assert found == expected


def test_a_trailing_stop_follows_the_best_price() -> None:
    trail = levels(trail="1.5")
    # Up to 110, then back 1.5 %: 108.35 fires, 108.36 does not (the entry at 100 is far below).
    assert exit_trigger(side="LONG", entry_price=100 * P, best_price=110 * P, price=10835 * P // 100, levels=trail)
    assert not exit_trigger(side="LONG", entry_price=100 * P, best_price=110 * P, price=10836 * P // 100, levels=trail)
    assert exit_trigger(side="SHORT", entry_price=100 * P, best_price=90 * P, price=9135 * P // 100, levels=trail)


@settings(deadline=None, max_examples=200)
@given(
    entry=st.integers(1, 10**9 * P),
    move=st.integers(-(10**6), 10**6),
    side=st.sampled_from(["LONG", "SHORT"]),
)
def test_no_level_fires_at_the_entry_price_and_the_stop_is_exact(entry: int, move: int, side: str) -> None:
    at_entry = exit_trigger(side=side, entry_price=entry, best_price=entry, price=entry, levels=levels("1", "1", "1"))
    assert at_entry is None
    price = max(entry + move, 1)
    found = exit_trigger(side=side, entry_price=entry, best_price=entry, price=price, levels=levels(sl="1"))
    loss = (entry - price) if side == "LONG" else (price - entry)
    assert (found == "stop_loss") == (loss * 100 >= entry)


@pytest.mark.django_db(transaction=True)
async def test_a_stop_loss_fires_on_the_paper_exchange_and_closes_the_position(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    await database_sync_to_async(TradeSetting.objects.filter(pk=setup.setting.pk).update)(stop_loss_pct=Decimal("1"))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("100", "50"),)))
    watcher = RiskWatcher(executor=executor, refresh_s=0.0)

    await watcher.consume(FeedData("sim", (tick("99.5", "1"),)))  # half a percent down: nothing
    await watcher.stop()
    assert watcher.triggers == 0
    await watcher.consume(FeedData("sim", (tick("98.9", "1"),)))
    await watcher.stop()
    assert watcher.triggers == 1
    await matcher.consume(FeedData("sim", (tick("98.9", "50"),)))

    position = await database_sync_to_async(Position.objects.get)(account=setup.account)
    assert position.state == "CLOSED"
    outcome = await database_sync_to_async(SignalOutcome.objects.get)(output_id__startswith="risk-stop-loss-")
    assert (outcome.outcome, outcome.signal_kind) == ("placed", "EXIT_LONG")
    event = await database_sync_to_async(AuditEvent.objects.get)(event="risk.stop_loss")
    assert "98.9" in event.message
    assert (await database_sync_to_async(ledger_check)(account_id=setup.account.pk)).ok
    # Closed: no more triggers.
    await watcher.consume(FeedData("sim", (tick("90", "1"),)))
    await watcher.stop()
    assert watcher.triggers == 1


@pytest.mark.django_db(transaction=True)
async def test_the_open_positions_limit_refuses_the_next_entry_with_its_reason(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    limits_forget()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=site_entry_gate,
    )
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    await database_sync_to_async(Account.objects.filter(pk=setup.account.pk).update)(max_open_positions=1)
    eth = await database_sync_to_async(make_instrument)("sim", "ETHUSDT")
    await database_sync_to_async(setup.strategy.instruments.add)(eth)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "10", symbol="ETHUSDT")) == [
        "halted"
    ]
    refused = await database_sync_to_async(SignalOutcome.objects.get)(symbol="ETHUSDT")
    assert "maximum is 1" in refused.reason
    limits_forget()


@pytest.mark.django_db(transaction=True)
async def test_the_open_positions_limit_holds_on_a_signal_fanned_out_to_several_accounts(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    # One signal on two accounts takes the grouped path, whose gate reads the kill switches
    # of all its accounts at once: the risk limits must still refuse per account.
    limits_forget()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=site_entry_gate,
        entry_gate_many=site_entry_gate_many,
    )
    limited = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    free = await database_sync_to_async(make_setup)(quantity="1", capital="100000", strategy=limited.strategy)
    await database_sync_to_async(Account.objects.filter(pk=limited.account.pk).update)(max_open_positions=1)
    eth = await database_sync_to_async(make_instrument)("sim", "ETHUSDT")
    await database_sync_to_async(limited.strategy.instruments.add)(eth)
    assert sorted(await executor.handle(make_signal(limited.strategy, SignalKind.ENTRY_LONG, "100"))) == [
        "placed",
        "placed",
    ]
    eth_entry = make_signal(limited.strategy, SignalKind.ENTRY_LONG, "10", symbol="ETHUSDT")
    assert sorted(await executor.handle(eth_entry)) == ["halted", "placed"]
    refused = await database_sync_to_async(SignalOutcome.objects.get)(symbol="ETHUSDT", account=limited.account)
    assert refused.outcome == "halted" and "maximum is 1" in refused.reason
    placed = await database_sync_to_async(SignalOutcome.objects.get)(symbol="ETHUSDT", account=free.account)
    assert placed.outcome == "placed"
    limits_forget()


@pytest.mark.django_db(transaction=True)
async def test_the_daily_loss_limit_engages_the_kill_switch_and_refuses_entries(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    limits_forget()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=site_entry_gate,
    )
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    await database_sync_to_async(Account.objects.filter(pk=setup.account.pk).update)(daily_loss_limit=Decimal("5"))
    # A losing round trip: bought at 100, sold at 90 (loss 10 plus fees).
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("100", "50"),)))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "90")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("90", "50"),)))

    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "90")) == ["halted"]
    watcher = RiskWatcher(executor=executor, halt_entries=entries_halt_by_risk_limit, refresh_s=0.0, loss_check_s=0.0)
    await watcher.consume(FeedData("sim", (tick("90", "1"),)))
    switch = await database_sync_to_async(KillSwitch.objects.get)(account=setup.account)
    assert switch.engaged and switch.reason.startswith("daily loss limit: realized -10.")
    audit = await database_sync_to_async(ControlAudit.objects.get)(account=setup.account)
    assert (audit.actor_name, audit.action) == ("risk-limits", "kill_switch.engage")
    # Engaged once, whatever the ticks that follow.
    await watcher.consume(FeedData("sim", (tick("90", "1"),)))
    assert await database_sync_to_async(ControlAudit.objects.filter(account=setup.account).count)() == 1
    limits_forget()


@pytest.mark.django_db(transaction=True)
async def test_a_failed_refresh_degrades_the_watcher_and_does_not_stop_it(
    executor: TradeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orders.risk_watch as risk_watch
    from core.health import HealthBoard, Status

    def broken() -> dict:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(risk_watch, "watched_positions", broken)
    health = HealthBoard()
    watcher = RiskWatcher(executor=executor, health=health, refresh_s=0.0)
    await watcher.consume(FeedData("sim", (tick("100", "1"),)))  # no exception
    assert health.get(risk_watch.COMPONENT).status is Status.DEGRADED
