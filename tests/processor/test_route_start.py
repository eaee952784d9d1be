"""A route added while trades flow misses none of them: each is in its warm-up or in its mailbox.

A trade routed just before the route was added reaches only the recorder; the recorder
writes every half second, so the route's first backfill read may not hold it yet. The
warm-up reads again until the recorded history holds it (and degrades the route when it
never does); a trade routed after the route was added waits in its mailbox, and one
that is in both is folded once.
"""

from __future__ import annotations

import asyncio

import pytest

from feeds.market import MarketData
from processor import execution as execution_module
from processor.backfill_source import InMemoryHistory
from processor.processor import Processor
from processor.routing import Degraded
from tests.processor.factories import FEED, RecordingSink, batch, route_of, spec, started, tick, turn


class RecorderBehind(InMemoryHistory):
    """Recorded history that writes `late` only once the next read has answered without it."""

    def __init__(self, recorded: list[MarketData]) -> None:
        super().__init__({(FEED, "BTC"): recorded})
        self.late: list[MarketData] = []

    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int):
        ticks = await super().ticks(feed, symbol, start_ns, end_ns)
        late, self.late = self.late, []
        self.add(FEED, late)  # the recorder writes them just after this read
        return ticks


def execution_of(processor: Processor, strategy_id: int):
    route = route_of(processor, strategy_id)
    return route, route.executor.execution((FEED, "BTC"))


@pytest.fixture
def quick_catch_up(monkeypatch):
    monkeypatch.setattr(execution_module, "BACKFILL_RETRY_S", 0.001)


async def test_a_trade_routed_just_before_the_route_started_is_in_its_warm_up(quick_catch_up):
    recorded = [tick("BTC", 1, trade_id="a"), tick("BTC", 2, trade_id="b")]
    in_flight = tick("BTC", 3, trade_id="c")
    history = RecorderBehind(recorded)
    sink = RecordingSink()
    processor = Processor(sink=sink, history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11)
    await started(processor, spec(2, ["BTC"]))  # a sibling already trades BTC
    await processor.consume(batch(in_flight))  # routed to the sibling; the recorder has not written it yet
    history.late = [in_flight]
    processor.reconcile([spec(2, ["BTC"]), spec(1, ["BTC"], params={"new": 1})])
    await processor.settled()
    route, execution = execution_of(processor, 1)
    for _ in range(500):  # it reads again after a short sleep
        if execution.live:
            break
        await asyncio.sleep(0.002)
    assert execution.live and execution.backfilled_ticks == 3  # 1, 2 and the trade in flight
    await processor.consume(batch(tick("BTC", 3, trade_id="c"), tick("BTC", 4, trade_id="d")))
    await turn()
    # The repeated trade is the warm-up's; only the new one is folded live.
    assert [o.occurrence_ns for o in sink.outputs_of(1)] == [4_000_000_000]
    assert execution.skipped_backfilled == 1
    await processor.stop()


async def test_a_trade_routed_during_the_backfill_read_is_folded_once():
    class RoutesDuringRead(InMemoryHistory):
        async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int):
            ticks = await super().ticks(feed, symbol, start_ns, end_ns)
            during = tick("BTC", 3, trade_id="c")
            processor.route(FEED, (during,))  # already routed to the new route: into its mailbox
            self.add(FEED, [during])
            return ticks

    history = RoutesDuringRead({(FEED, "BTC"): [tick("BTC", 1, trade_id="a")]})
    sink = RecordingSink()
    processor = Processor(sink=sink, history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11)
    await started(processor, spec(1, ["BTC"]))
    _, execution = execution_of(processor, 1)
    assert execution.live and execution.backfilled_ticks == 1
    assert [o.occurrence_ns for o in sink.outputs_of(1)] == [3_000_000_000]
    await processor.stop()


async def test_a_recorder_that_never_catches_up_degrades_the_route_with_the_reason(quick_catch_up, monkeypatch):
    monkeypatch.setattr(execution_module, "BACKFILL_CATCH_UP_S", 0.05)
    history = InMemoryHistory({(FEED, "BTC"): [tick("BTC", 1, trade_id="a")]})
    processor = Processor(sink=RecordingSink(), history=history, backfill_default_ns=10**12, clock_ns=lambda: 10**11)
    await started(processor)
    await processor.consume(batch(tick("BTC", 2, trade_id="lost")))  # never recorded
    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    for _ in range(200):
        await asyncio.sleep(0.001)
        route, _ = execution_of(processor, 1)
        if isinstance(route.state, Degraded):
            break
    await processor.settled()
    route, _ = execution_of(processor, 1)
    assert isinstance(route.state, Degraded)
    assert "do not reach the last trade routed before the route started" in route.state.cause
    await processor.stop()


async def test_without_recorded_history_a_route_starts_on_live_trades_at_once():
    sink = RecordingSink()
    processor = Processor(sink=sink)  # no recorder: nothing to wait for
    await started(processor)
    await processor.consume(batch(tick("BTC", 1)))
    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    await turn()
    _, execution = execution_of(processor, 1)
    assert execution.live and execution.backfilled_ticks == 0
    await processor.stop()
