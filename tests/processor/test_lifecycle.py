"""The strategy runtime's lifecycle (routes added and removed, backfill, degrade, fail-fast), on the real Processor / executor / execution."""

from __future__ import annotations

import asyncio

import pytest

from processor.backfill_source import InMemoryHistory
from processor.mailbox import Mailbox
from processor.processor import Processor
from processor.readiness import ProcessorHealth
from processor.routing import Active, Degraded, Stopping
from tests.processor.factories import FEED, RecordingSink, batch, route_of, spec, started, tick, turn


class BlockingHistory(InMemoryHistory):
    """Backfill whose first request hangs until released (the first execution created)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int):
        if not self.requests:
            self.requests.append((feed, symbol, start_ns, end_ns))
            await self.release.wait()
            return []
        return await super().ticks(feed, symbol, start_ns, end_ns)


async def test_removal_with_an_open_position_keeps_the_execution_until_the_managed_exit():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC"]))
    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    assert sink.kinds() == ["ENTRY_LONG"]

    processor.reconcile([])
    await processor.settled()
    route = route_of(processor, 1)
    assert isinstance(route.state, Stopping) and route.state.retained == {(FEED, "BTC")}
    # Still routed: ticks keep reaching the retained execution.
    await processor.consume(batch(tick("BTC", 2)))
    await turn()
    assert len(sink.outputs_of(1)) == 2

    await processor.consume(batch(tick("BTC", 3, trade_id="flat")))  # the strategy's own exit
    await turn()
    await processor.settled()
    assert sink.kinds() == ["ENTRY_LONG", "EXIT_LONG"]
    assert processor.snapshot.routes_by_strategy == {}
    assert processor.snapshot.routes_by_instrument == {}
    await processor.stop()


async def test_removing_an_instrument_with_an_open_position_retains_only_that_execution():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC", "ETH"]))
    await processor.consume(batch(tick("BTC", 1, trade_id="long"), tick("ETH", 1)))
    await turn()
    processor.reconcile([spec(1, ["SOL"])])
    await processor.settled()
    route = route_of(processor, 1)
    assert isinstance(route.state, Active)
    assert route.executor.current_instrument_ids() == {(FEED, "BTC"), (FEED, "SOL")}
    assert set(processor.snapshot.routes_by_instrument[FEED]) == {"BTC", "SOL"}
    await processor.consume(batch(tick("BTC", 2, trade_id="flat")))
    await turn()
    await processor.settled()
    assert route.executor.current_instrument_ids() == {(FEED, "SOL")}
    assert set(processor.snapshot.routes_by_instrument[FEED]) == {"SOL"}
    await processor.stop()


async def test_readding_before_cleanup_keeps_the_retained_execution():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC"]))
    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    execution = route_of(processor, 1).executor.execution((FEED, "BTC"))
    processor.reconcile([])
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Stopping)

    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    route = route_of(processor, 1)
    assert isinstance(route.state, Active)
    assert route.executor.execution((FEED, "BTC")) is execution
    assert execution.has_open_position
    # The stopping watcher is gone: flattening now keeps the route.
    await processor.consume(batch(tick("BTC", 2, trade_id="flat")))
    await turn()
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Active)
    await processor.stop()


async def test_readding_after_cleanup_starts_a_fresh_execution_with_backfill():
    history = InMemoryHistory()
    sink = RecordingSink()
    processor = await started(
        Processor(sink=sink, history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11), spec(1, ["BTC"])
    )
    first = route_of(processor, 1)
    old_execution = first.executor.execution((FEED, "BTC"))
    assert len(history.requests) == 1
    processor.reconcile([])
    await processor.settled()
    assert processor.snapshot.routes_by_strategy == {}

    history.add(FEED, [tick("BTC", 1), tick("BTC", 2)])
    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    await turn()
    second = route_of(processor, 1)
    execution = second.executor.execution((FEED, "BTC"))
    assert second.route_instance_id != first.route_instance_id
    assert execution is not old_execution and execution.execution_id != old_execution.execution_id
    assert len(history.requests) == 2 and execution.backfilled_ticks == 2
    await processor.stop()


async def test_live_ticks_already_in_the_backfill_are_not_folded_twice():
    history = InMemoryHistory({(FEED, "BTC"): [tick("BTC", 1, trade_id="a"), tick("BTC", 2, trade_id="b")]})
    sink = RecordingSink()
    processor = await started(
        Processor(sink=sink, history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11), spec(1, ["BTC"])
    )
    await processor.consume(batch(tick("BTC", 2, trade_id="b"), tick("BTC", 2, trade_id="c"), tick("BTC", 3)))
    await turn()
    assert [o.occurrence_ns for o in sink.outputs_of(1)] == [2_000_000_000, 3_000_000_000]
    await processor.stop()


async def test_mailbox_overflow_degrades_only_that_route_and_siblings_keep_running():
    history = BlockingHistory()
    sink = RecordingSink()
    processor = Processor(sink=sink, history=history, mailbox_capacity=8)
    # Strategy 1 hangs in backfill on BTC, so its instrument mailbox fills; 2 is healthy.
    await started(processor, spec(1, ["BTC"]), spec(2, ["BTC"], params={"other": 1}))
    for second in range(20):
        await processor.consume(batch(tick("BTC", second)))
    await turn()
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Degraded)
    assert "instrument mailbox full" in route_of(processor, 1).state.cause
    assert isinstance(route_of(processor, 2).state, Active)
    assert len(sink.outputs_of(2)) == 20
    targets = processor.snapshot.routes_by_instrument[FEED]["BTC"]
    assert [key[0] for key, _, _ in targets] == [2]
    readiness = processor.readiness()
    assert readiness.ready and readiness.health is ProcessorHealth.DEGRADED
    assert not processor.fatal.done()
    history.release.set()
    await processor.stop()


async def test_repeated_overflow_enqueues_one_degrade_per_route_incarnation():
    processor = Processor(sink=RecordingSink(), route_mailbox_capacity=4)
    await started(processor, spec(1, ["BTC"]))
    # route() never awaits: the executor cannot drain between these calls.
    for second in range(10):
        processor.route(FEED, (tick("BTC", second),))
    assert processor._commands.qsize() == 1
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Degraded)
    await processor.stop()


async def test_a_stale_degrade_for_an_old_incarnation_is_discarded():
    processor = await started(Processor(sink=RecordingSink()), spec(1, ["BTC"]))
    old = route_of(processor, 1)
    processor.reconcile([])
    await processor.settled()
    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    new = route_of(processor, 1)
    assert new.route_instance_id != old.route_instance_id

    discarded = processor.discarded_commands
    processor.request_degrade(old.key, old.route_instance_id, "late overflow of the old route")
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Active)
    assert processor.discarded_commands == discarded + 1
    await processor.stop()


async def test_degrade_with_open_positions_fails_fast():
    processor = Processor(sink=RecordingSink(), route_mailbox_capacity=4)
    await started(processor, spec(1, ["BTC"]))
    watcher = processor._core["fatal-watcher"]
    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    for second in range(2, 10):
        processor.route(FEED, (tick("BTC", second),))
    await processor.settled()
    route = route_of(processor, 1)
    assert isinstance(route.state, Degraded) and route.state.has_open_positions
    assert processor.fatal.done()
    with pytest.raises(Exception, match="degraded with open positions"):
        await watcher
    readiness = processor.readiness()
    assert not readiness.ready and readiness.health is ProcessorHealth.BLOCKED
    await processor.stop()


async def test_a_strategy_that_raises_degrades_its_route():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC"]), spec(2, ["BTC"], params={"x": 1}))
    route_of(processor, 1).executor.execution((FEED, "BTC")).logic.fold = None  # type: ignore[assignment]
    await processor.consume(batch(tick("BTC", 1)))
    await turn()
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Degraded)
    assert isinstance(route_of(processor, 2).state, Active)
    assert len(sink.outputs_of(2)) == 1
    await processor.stop()


async def test_a_later_batch_never_overtakes_an_earlier_one():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC", "ETH"]), spec(2, ["ETH"], params={"x": 1}))
    sent = {"BTC": [], "ETH": []}
    t = 0
    for size in (1, 3, 300, 2, 700, 1):  # includes batches larger than a routing slice
        ticks = []
        for _ in range(size):
            t += 1
            symbol = "BTC" if t % 3 else "ETH"
            ticks.append(tick(symbol, t))
            sent[symbol].append(t * 1_000_000_000)
        await processor.consume(batch(*ticks))
    await turn()
    assert [o.occurrence_ns for o in sink.outputs_of(1, "BTC")] == sent["BTC"]
    assert [o.occurrence_ns for o in sink.outputs_of(1, "ETH")] == sent["ETH"]
    assert [o.occurrence_ns for o in sink.outputs_of(2, "ETH")] == sent["ETH"]
    await processor.stop()


async def test_only_trades_are_routed():
    from feeds.market import MarkPrice

    sink = RecordingSink()
    processor = await started(Processor(sink=sink), spec(1, ["BTC"]))
    mark = MarkPrice(symbol="BTC", mark_price=10**10, ts_event=10**9, ts_recv=10**9)
    await processor.consume(batch(mark, tick("BTC", 2)))  # type: ignore[arg-type]
    await turn()
    assert [o.occurrence_ns for o in sink.outputs_of(1)] == [2_000_000_000]
    await processor.stop()


async def test_signals_link_to_the_output_of_the_tick_that_caused_them():
    sink = RecordingSink()
    processor = await started(Processor(sink=sink, clock_ns=lambda: 42), spec(1, ["BTC"]))
    await processor.consume(batch(tick("BTC", 1), tick("BTC", 2, trade_id="short")))
    await turn()
    [signal] = sink.signal_log
    [output] = sink.signal_outputs
    assert signal.output_id == output.output_id == sink.outputs_of(1)[1].output_id
    assert output.occurrence_ns == signal.occurrence_ns == 2_000_000_000
    assert signal.emitted_ns == 42
    await processor.stop()


def test_a_full_mailbox_refuses_without_waiting():
    mailbox: Mailbox[str] = Mailbox(capacity=3)
    assert mailbox.offer("a", 2)
    assert not mailbox.offer("b", 2)
    assert mailbox.offer("c", 1)
    assert mailbox.take_nowait() == ["a", "c"] and mailbox.size == 0


async def test_executions_and_executors_refuse_to_start_before_a_subscriber():
    from processor.backfill_source import NoHistory
    from processor.strategy_executor import StrategyExecutor

    executor = StrategyExecutor(
        spec=spec(1, ["BTC"]),
        strategy_mailbox=Mailbox(),
        history=NoHistory(),
        on_route_overflow=lambda *a: None,
        on_instrument_route_added=lambda *a: None,
        on_instrument_route_removed=lambda *a: None,
    )
    with pytest.raises(RuntimeError, match="subscriber"):
        executor.start()


async def test_the_reconcile_loop_survives_a_failing_strategy_table_and_picks_up_changes():
    calls = []
    desired = [spec(1, ["BTC"])]

    async def load():
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("database restarting")
        return list(desired)

    processor = Processor(sink=RecordingSink(), load_desired=load, reconcile_interval_s=0.001)
    processor.start()
    while len(calls) < 4:
        await asyncio.sleep(0.001)
    await processor.settled()
    assert processor.instrument_routes() == {"s1": {(FEED, "BTC")}}
    desired.append(spec(2, ["ETH"], params={"x": 1}))
    while len(calls) < 8:
        await asyncio.sleep(0.001)
    await processor.settled()
    assert set(processor.instrument_routes()) == {"s1", "s2"}
    assert processor.readiness().ready
    await processor.stop()
