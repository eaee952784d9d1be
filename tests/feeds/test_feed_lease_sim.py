"""The simulated tape resumes after a recorded trade: no id repeated, none skipped."""

from __future__ import annotations

import asyncio

import pytest
from websockets.exceptions import ConnectionClosed

from core.health import HealthBoard
from feeds.market import MarketData
from feeds.streams.local_streams import build_local_stream
from feeds.venues.base import FeedSpec, InstrumentSpec
from feeds.venues.simulated import VENUE, SimulatedMarket

SPECS = (InstrumentSpec("BTC-USD", "0.1", "0.001"), InstrumentSpec("DOGE-USD", "0.00001", "10"))
START = {"BTC-USD": "64000", "DOGE-USD": "0.15"}


def market(after: dict[str, MarketData] | None = None) -> SimulatedMarket:
    return SimulatedMarket(seed=7, volatility_bps=5, instruments=SPECS, start_prices=START, after=after)


def trades(sim: SimulatedMarket, rounds: int) -> list[MarketData]:
    return [VENUE.parse(frame, 0)[0] for i in range(rounds) for frame in sim.next_round(1_700_000_000_000 + i)]


def comparable(trade: MarketData) -> tuple[object, ...]:
    """A trade without its times: a resumed tape stamps its trades when it makes them."""
    return (trade.symbol, trade.trade_id, trade.price, trade.volume, trade.side)


def test_a_market_resumed_after_a_trade_goes_on_with_the_same_tape() -> None:
    whole = trades(market(), 100)
    first = trades(market(), 40)
    last = {t.symbol: t for t in first}
    resumed = trades(market(after=last), 60)
    assert [comparable(t) for t in first + resumed] == [comparable(t) for t in whole]
    assert [t.trade_id for t in resumed if t.symbol == "BTC-USD"] == [str(i) for i in range(41, 101)]


def test_a_market_resumed_at_different_points_per_symbol_continues_each() -> None:
    whole = trades(market(), 50)
    last = {
        "BTC-USD": next(t for t in whole if t.symbol == "BTC-USD" and t.trade_id == "10"),
        "DOGE-USD": next(t for t in whole if t.symbol == "DOGE-USD" and t.trade_id == "30"),
    }
    resumed = trades(market(after=last), 5)
    btc = [t for t in resumed if t.symbol == "BTC-USD"]
    doge = [t for t in resumed if t.symbol == "DOGE-USD"]
    assert [comparable(t) for t in btc] == [comparable(t) for t in whole if t.symbol == "BTC-USD"][10:15]
    assert [comparable(t) for t in doge] == [comparable(t) for t in whole if t.symbol == "DOGE-USD"][30:35]


def test_a_checkpoint_without_a_numeric_trade_id_starts_the_tape_afresh() -> None:
    [first] = [t for t in trades(market(), 1) if t.symbol == "BTC-USD"]
    odd = MarketData("BTC-USD", first.price, first.volume, 0, 0, trade_id="abc")
    [again] = [t for t in trades(market(after={"BTC-USD": odd}), 1) if t.symbol == "BTC-USD"]
    assert comparable(again) == comparable(first)


@pytest.mark.parametrize("reopen", [False, True])
async def test_the_local_stream_opens_the_tape_after_its_checkpoints_and_reopens_after_what_it_delivered(
    reopen: bool,
) -> None:
    """The production wiring: build_local_stream hands the venue the checkpoints first and
    the trades it delivered since on every reopen of its source."""
    spec = FeedSpec("sim", "simulated", VENUE.clean_settings({"interval_ms": 10, "seed": 7}), SPECS)
    checkpoint = {t.symbol: t for t in trades(market(), 5) if t.trade_id == "5"}
    delivered: list[MarketData] = []
    stream = build_local_stream(
        spec,
        VENUE,
        publish=lambda batch: delivered.extend(e for e in batch.events if isinstance(e, MarketData)),
        health=HealthBoard(),  # type: ignore[arg-type]
        checkpoints=checkpoint,
    )
    task = asyncio.create_task(stream.run())
    try:
        while len(delivered) < 6:
            await asyncio.sleep(0.005)
        if reopen:
            count = len(delivered)

            async def lost() -> bytes:
                raise ConnectionClosed(None, None)

            stream._session.current.recv = lost  # type: ignore[union-attr,method-assign]
            while len(delivered) < count + 6:
                await asyncio.sleep(0.005)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    btc = [int(t.trade_id or 0) for t in delivered if t.symbol == "BTC-USD"]
    assert btc == list(range(6, 6 + len(btc)))  # after the checkpoint, no repeat, no skip
