"""Executions start with the position their strategy already holds (restart, new params)."""

from __future__ import annotations

import pytest

from processor.backfill_source import InMemoryHistory
from processor.processor import Processor
from processor.readiness import ProcessorHealth
from processor.routing import Degraded, Stopping
from processor.signals import Position, SignalKind
from processor.strategies.ema import EmaCrossover
from processor.strategies.volume_breakout import VolumeBreakout
from tests.processor.factories import FEED, RecordingSink, batch, spec, tick, turn


class Ledger:
    """A held-position lookup over a dict, recording what was asked."""

    def __init__(self, held: dict[tuple[int, str, str], Position] | None = None) -> None:
        self.held = dict(held or {})
        self.asked: list[tuple[int, str, str]] = []

    async def __call__(self, strategy_id: int, feed: str, symbol: str) -> Position:
        self.asked.append((strategy_id, feed, symbol))
        return self.held.get((strategy_id, feed, symbol), Position.FLAT)


async def started(processor: Processor, *specs) -> Processor:
    processor.start()
    processor.reconcile(list(specs))
    await processor.settled()
    await turn()
    await processor.settled()
    return processor


def routes_of(processor: Processor, strategy_id: int):
    return [r for r in processor.snapshot.routes_by_strategy.values() if r.spec.strategy_id == strategy_id]


async def test_a_restarted_execution_resumes_the_held_position_and_its_next_exit_closes_it():
    ledger = Ledger({(1, FEED, "BTC"): Position.LONG})
    sink = RecordingSink()
    processor = await started(Processor(sink=sink, held_position=ledger), spec(1, ["BTC", "ETH"]))
    assert sorted(ledger.asked) == [(1, FEED, "BTC"), (1, FEED, "ETH")]
    [route] = routes_of(processor, 1)
    assert route.executor.execution((FEED, "BTC")).has_open_position
    assert not route.executor.execution((FEED, "ETH")).has_open_position

    # Already long: a long decision is no new entry; the flat one is the exit of that position.
    await processor.consume(batch(tick("BTC", 1, trade_id="long"), tick("ETH", 1, trade_id="long")))
    await turn()
    assert [(s.symbol, s.kind) for s in sink.signal_log] == [("ETH", SignalKind.ENTRY_LONG)]
    await processor.consume(batch(tick("BTC", 2, trade_id="flat")))
    await turn()
    assert [(s.symbol, s.kind) for s in sink.signal_log][1:] == [("BTC", SignalKind.EXIT_LONG)]
    await processor.stop()


async def test_a_held_position_on_an_instrument_no_longer_wanted_is_kept_until_its_exit():
    ledger = Ledger({(1, FEED, "BTC"): Position.SHORT})
    sink = RecordingSink()
    processor = await started(Processor(sink=sink, held_position=ledger), spec(1, ["BTC"]))
    processor.reconcile([])
    await processor.settled()
    [route] = routes_of(processor, 1)
    assert isinstance(route.state, Stopping) and route.state.retained == {(FEED, "BTC")}
    await processor.consume(batch(tick("BTC", 1, trade_id="flat")))
    await turn()
    await processor.settled()
    assert sink.kinds() == ["EXIT_SHORT"]
    assert processor.snapshot.routes_by_strategy == {}
    await processor.stop()


async def test_a_failing_lookup_degrades_the_route_with_the_reason_instead_of_trading_blind():
    async def broken(strategy_id: int, feed: str, symbol: str) -> Position:
        raise ConnectionError("ledger unreachable")

    processor = await started(Processor(sink=RecordingSink(), held_position=broken), spec(1, ["BTC"]))
    await processor.settled()
    [route] = routes_of(processor, 1)
    assert isinstance(route.state, Degraded) and "ledger unreachable" in route.state.cause
    readiness = processor.readiness()
    assert readiness.health == ProcessorHealth.DEGRADED and "ledger unreachable" in readiness.reason
    await processor.stop()


async def test_new_params_take_over_the_open_position_and_manage_its_exit():
    ledger = Ledger()
    sink = RecordingSink()
    processor = await started(Processor(sink=sink, held_position=ledger), spec(1, ["BTC", "ETH"], params={"v": 1}))
    await processor.consume(batch(tick("BTC", 1, trade_id="short"), tick("ETH", 1)))
    await turn()
    assert sink.kinds() == ["ENTRY_SHORT"]
    [old] = routes_of(processor, 1)
    ledger.asked.clear()

    processor.reconcile([spec(1, ["BTC", "ETH"], params={"v": 2})])
    await processor.settled()
    await turn()
    await processor.settled()
    # One route, the new one: no "stopping with open positions" left behind.
    [new] = routes_of(processor, 1)
    assert new.route_instance_id != old.route_instance_id and '"v": 2' in new.spec.params_json
    assert processor.readiness().health == ProcessorHealth.HEALTHY
    assert old.executor.cancelled
    # The handed-over position wins over the ledger (which says flat): only ETH was looked up.
    assert ledger.asked == [(1, FEED, "ETH")]
    assert new.executor.execution((FEED, "BTC")).has_open_position

    await processor.consume(batch(tick("BTC", 2, trade_id="short")))  # still short: nothing new
    await processor.consume(batch(tick("BTC", 3, trade_id="flat")))
    await turn()
    assert sink.kinds() == ["ENTRY_SHORT", "EXIT_SHORT"]
    exit_execution = new.executor.execution((FEED, "BTC")).execution_id
    assert {s.output_id.split(":")[0] for s in sink.signal_log[1:]} == {exit_execution}
    await processor.stop()


async def test_new_params_without_an_instrument_leave_its_position_to_the_old_route_until_flat():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC", "ETH"], params={"v": 1}))
    await processor.consume(batch(tick("BTC", 1, trade_id="long"), tick("ETH", 1, trade_id="long")))
    await turn()

    processor.reconcile([spec(1, ["BTC"], params={"v": 2})])
    await processor.settled()
    await turn()
    await processor.settled()
    states = {r.route_instance_id: r.state for r in routes_of(processor, 1)}
    assert len(states) == 2
    [stopping] = [r for r in routes_of(processor, 1) if isinstance(r.state, Stopping)]
    assert stopping.state.retained == {(FEED, "ETH")}  # BTC went to the new route
    await processor.consume(batch(tick("ETH", 2, trade_id="flat"), tick("BTC", 2, trade_id="flat")))
    await turn()
    await processor.settled()
    assert sorted(sink.kinds()) == ["ENTRY_LONG", "ENTRY_LONG", "EXIT_LONG", "EXIT_LONG"]
    [only] = routes_of(processor, 1)
    assert '"v": 2' in only.spec.params_json
    await processor.stop()


async def test_a_position_handed_over_while_the_new_execution_warms_up_is_not_lost():
    history = InMemoryHistory()
    sink = RecordingSink()
    processor = await started(
        Processor(sink=sink, history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11),
        spec(1, ["BTC"], params={"v": 1}),
    )
    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    # Two changes in a row: the second one hands over from an execution the first just created.
    processor.reconcile([spec(1, ["BTC"], params={"v": 2})])
    processor.reconcile([spec(1, ["BTC"], params={"v": 3})])
    await processor.settled()
    await turn()
    await processor.settled()
    [route] = routes_of(processor, 1)
    assert '"v": 3' in route.spec.params_json
    assert route.executor.execution((FEED, "BTC")).has_open_position
    await processor.consume(batch(tick("BTC", 200, trade_id="flat")))
    await turn()
    assert sink.kinds() == ["ENTRY_LONG", "EXIT_LONG"]
    await processor.stop()


# -- the strategy kinds honour an adopted position ------------------------------------------

EMA = {"timeframe_s": 10, "fast": 1, "slow": 3, "long_only": False}


def warmed_ema() -> EmaCrossover:
    ema = EmaCrossover(EMA)
    ema.warm([tick("X", 1, 100), tick("X", 11, 101), tick("X", 21, 102), tick("X", 31, 103)])
    return ema


def fold(strategy, *ticks) -> list[SignalKind]:
    rows, signals = [], []
    strategy.fold(list(ticks), rows, signals)
    return [kind for _, kind, _, _ in signals]


def test_ema_adopting_the_side_it_wants_emits_nothing_and_exits_it_on_the_cross():
    ema = warmed_ema()
    ema.adopt(Position.LONG)
    assert fold(ema, tick("X", 41, 104)) == []  # rising: fast > slow, already long
    assert fold(ema, tick("X", 51, 90)) == [SignalKind.EXIT_LONG, SignalKind.ENTRY_SHORT]


def test_ema_adopting_the_other_side_exits_it_at_the_first_live_tick():
    ema = warmed_ema()
    ema.adopt(Position.SHORT)
    assert fold(ema, tick("X", 41, 104)) == [SignalKind.EXIT_SHORT, SignalKind.ENTRY_LONG]


def test_ema_without_adoption_would_enter_again_on_top_of_the_held_position():
    # What a restart did before: the entry the orders side refuses as already open.
    assert fold(warmed_ema(), tick("X", 41, 104)) == [SignalKind.ENTRY_LONG]


def bars(strategy: VolumeBreakout, start: int, *prices: float, trading: bool = True) -> list[SignalKind]:
    rows, signals = [], []
    strategy.fold([tick("X", start + i, price, 1) for i, price in enumerate(prices)], rows, signals, trading=trading)
    return [kind for _, kind, _, _ in signals]


def test_volume_breakout_counts_the_hold_of_an_adopted_position_from_adoption():
    vb = VolumeBreakout({"bar_volume": "1", "lookback": 2, "hold_bars": 2, "cooldown_bars": 0})
    bars(vb, 0, 10, 11, 12, 13, 14, trading=False)  # 5 closed bars of warm-up
    vb.adopt(Position.LONG)
    assert bars(vb, 10, 13.5) == []  # one bar after adoption: still held
    assert bars(vb, 11, 13.6) == [SignalKind.EXIT_LONG]  # hold_bars after adoption: the managed exit


def test_volume_breakout_reverses_an_adopted_position_on_an_opposite_breakout():
    vb = VolumeBreakout({"bar_volume": "1", "lookback": 2, "hold_bars": 5, "cooldown_bars": 0})
    bars(vb, 0, 10, 11, 12, trading=False)
    vb.adopt(Position.LONG)
    assert bars(vb, 10, 5) == [SignalKind.EXIT_LONG, SignalKind.ENTRY_SHORT]


# -- what the ledger says -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_ledger_lookup_takes_the_open_side_and_describes_disagreeing_accounts():
    from orders.models import Position as PositionRow
    from orders.positions import HeldPosition, strategy_held_position
    from tests.orders.factories import make_instrument, make_setup, make_strategy

    strategy = make_strategy()
    other = make_strategy()
    instrument = make_instrument("sim", "BTCUSDT")
    a = make_setup(strategy=strategy, instrument=instrument)
    b = make_setup(strategy=strategy, instrument=instrument)
    assert strategy_held_position(strategy.pk, "sim", "BTCUSDT").position == Position.FLAT

    def open_position(account, side, strategy=strategy, state=PositionRow.State.OPEN):
        return PositionRow.objects.create(
            account=account,
            strategy=strategy,
            instrument=instrument,
            side=side,
            quantity=10**6,
            state=state,
        )

    open_position(a.account, "SHORT", state=PositionRow.State.CLOSED)  # history does not count
    open_position(b.account, "LONG", strategy=other)  # another strategy's position does not count
    assert strategy_held_position(strategy.pk, "sim", "BTCUSDT").position == Position.FLAT

    open_position(a.account, "LONG")
    held = strategy_held_position(strategy.pk, "sim", "BTCUSDT")
    assert held.position == Position.LONG
    assert f"LONG in account {a.account.pk}" in held.disagreement
    assert f"flat in account {b.account.pk}" in held.disagreement

    open_position(b.account, "LONG")
    assert strategy_held_position(strategy.pk, "sim", "BTCUSDT") == HeldPosition(Position.LONG, "")
    assert strategy_held_position(strategy.pk, "sim", "ETHUSDT").position == Position.FLAT


@pytest.mark.django_db(transaction=True)
async def test_the_runtime_lookup_resumes_the_open_side_and_audits_a_disagreement():
    from channels.db import database_sync_to_async

    from orders.models import AuditEvent
    from orders.models import Position as PositionRow
    from tests.orders.factories import make_instrument, make_setup, make_strategy
    from tradingsite.runtime.compose import build_hubs

    held_position = build_hubs().held_position

    def setup() -> tuple[int, int, int]:
        strategy = make_strategy()
        instrument = make_instrument("sim", "ETHUSDT")
        short = make_setup(strategy=strategy, instrument=instrument)
        flat = make_setup(strategy=strategy, instrument=instrument)
        PositionRow.objects.create(
            account=short.account,
            strategy=strategy,
            instrument=instrument,
            side="SHORT",
            quantity=10**7,
        )
        return strategy.pk, short.account.pk, flat.account.pk

    strategy_id, short_account, flat_account = await database_sync_to_async(setup)()
    assert await held_position(strategy_id, "sim", "ETHUSDT") == Position.SHORT
    disagreements = AuditEvent.objects.filter(event="position.accounts_disagree")
    [event] = await database_sync_to_async(lambda: list(disagreements))()
    assert event.strategy_id == strategy_id
    assert f"SHORT in account {short_account}" in event.message and f"flat in account {flat_account}" in event.message
    assert event.details == {"feed": "sim", "symbol": "ETHUSDT", "resumed": "SHORT"}
    # Agreement (or nothing held) leaves no event.
    assert await held_position(strategy_id, "sim", "BTCUSDT") == Position.FLAT
    assert await database_sync_to_async(disagreements.count)() == 1


async def test_a_held_position_counts_as_open_while_the_execution_is_still_backfilling():
    import asyncio

    class SlowHistory(InMemoryHistory):
        def __init__(self) -> None:
            super().__init__()
            self.release = asyncio.Event()

        async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int):
            await self.release.wait()
            return []

    history = SlowHistory()
    sink = RecordingSink()
    ledger = Ledger({(1, FEED, "BTC"): Position.LONG})
    processor = await started(Processor(sink=sink, history=history, held_position=ledger), spec(1, ["BTC"]))
    [route] = routes_of(processor, 1)
    execution = route.executor.execution((FEED, "BTC"))
    assert not execution.live and execution.has_open_position

    # Removed while warming up: it must stay to manage the exit, not vanish with the position.
    processor.reconcile([])
    await processor.settled()
    [route] = routes_of(processor, 1)
    assert isinstance(route.state, Stopping) and route.state.retained == {(FEED, "BTC")}
    history.release.set()
    await turn()
    await processor.consume(batch(tick("BTC", 1, trade_id="flat")))
    await turn()
    await processor.settled()
    assert sink.kinds() == ["EXIT_LONG"]
    assert processor.snapshot.routes_by_strategy == {}
    await processor.stop()


async def test_a_stopping_route_whose_position_the_ledger_no_longer_holds_is_removed_and_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    import processor.processor as processor_module

    monkeypatch.setattr(processor_module, "STOPPING_LEDGER_CHECK_S", 0.05)
    ledger = Ledger({(1, FEED, "BTC"): Position.SHORT})
    processor = await started(Processor(sink=RecordingSink(), held_position=ledger), spec(1, ["BTC"]))
    processor.reconcile([])
    await processor.settled()
    [route] = routes_of(processor, 1)
    assert isinstance(route.state, Stopping)
    readiness = processor.readiness()
    assert readiness.health is ProcessorHealth.DEGRADED
    assert "keeps BTC until its own exit or until the position is closed" in readiness.reason
    # Closed elsewhere (by hand, a stop-loss): the strategy never exits it, the ledger says flat.
    ledger.held.clear()
    for _ in range(100):
        await asyncio.sleep(0.02)
        await processor.settled()
        if not processor.snapshot.routes_by_strategy:
            break
    assert processor.snapshot.routes_by_strategy == {}
    assert processor.readiness().health is ProcessorHealth.HEALTHY
    await processor.stop()
