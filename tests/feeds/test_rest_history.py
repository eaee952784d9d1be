"""Trade history paging for gap recovery: Binance by time windows, bitFlyer by id."""

from __future__ import annotations

from feeds.market import MarketData, parse_fixed
from feeds.streams.consistency import TradeStreamConsistencyController, TradeStreamStateStore
from feeds.streams.gap_recovery import RuntimeRecoveryCoordinator, TradeRecoveryController
from feeds.streams.rest_history import RestTradeHistory
from feeds.streams.window_planner import TradeRecoveryWindow, TradeRecoveryWindowPlanner
from feeds.venues import get_venue
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.fakes.bitflyer_rest import Execution, FakeBitflyerRest


async def test_binance_window_with_more_than_a_page_continues_by_id_and_stops_at_the_window_end() -> None:
    async with FakeBinanceUsdm(make_tape(3600, ("BTCUSDT",))) as venue:
        venue.release(3500)  # all in one millisecond: only id paging can get past the first page
        ts_ms = venue.executed[0].ts_ms
        venue._clock_ms = lambda: ts_ms + 10
        venue.release(100)
        history = RestTradeHistory(get_venue("binance-usdm"), {"rest_url": venue.rest_url})  # type: ignore[arg-type]
        try:
            trades = await history.fetch_window(TradeRecoveryWindow("BTCUSDT", ts_ms, ts_ms + 5), None)
        finally:
            await history.close()
        assert [t.trade_id for t in trades] == [str(e.trade.agg_id) for e in venue.executed[:3500]]
        assert history.pages == 4  # 1000 by time, 2000 by id, then a page that crosses the window end


def _execution(exec_id: int) -> Execution:
    return Execution(
        exec_id,
        "BUY" if exec_id % 2 else "SELL",
        f"{13_633_000 + exec_id}.0",
        "0.01",
        f"2026-11-30T01:00:{exec_id % 60:02d}.123",
    )


async def test_bitflyer_recovery_walks_ids_backwards_from_the_newest_down_to_the_checkpoint() -> None:
    async with FakeBitflyerRest([_execution(i) for i in range(1, 1301)]) as rest:
        venue = get_venue("bitflyer")
        history = RestTradeHistory(venue, {"rest_url": rest.url})  # type: ignore[arg-type]
        consistency = TradeStreamConsistencyController(TradeStreamStateStore())
        checkpoint = MarketData(
            "BTC_JPY", parse_fixed("13633100"), parse_fixed("0.01"), 1_796_000_000_000_000_000, 0, trade_id="100"
        )
        consistency.restore_checkpoint(checkpoint)
        delivered: list[MarketData] = []
        coordinator = RuntimeRecoveryCoordinator(
            consistency.store,
            TradeRecoveryWindowPlanner(31 * 86_400_000),
            TradeRecoveryController(history, consistency, sink=delivered.extend),
        )
        try:
            result = await coordinator.recover("BTC_JPY", 1_796_000_100_000)
        finally:
            await history.close()
    assert [t.trade_id for t in delivered] == [str(i) for i in range(101, 1301)]
    assert list(result.recovered_trades) == delivered
    assert [r.get("before") for r in rest.requests] == [None, "801", "301"]
    assert all(r["after"] == "100" for r in rest.requests)
    assert consistency.store.get("BTC_JPY").last_trade_id == "1300"  # type: ignore[union-attr]
