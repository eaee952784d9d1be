"""Recorded ticks for strategy backfill: the historical tick provider.

The processor reads a window of what the recorder stored, as the same MarketData the
live feed delivers (venue symbol, fixed-point numbers, integer ns times):

    from feeds.recording.tick_history import recorded_ticks
    ticks = recorded_ticks("binance", "BTCUSDT", start_ns, end_ns)

This is synchronous ORM code; from a coroutine call `arecorded_ticks` (or wrap it in
`channels.db.database_sync_to_async`).
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from feeds.market import MarketData, Side
from feeds.recording.tick_selectors import find_instrument, iter_tick_values, ticks_in_order

_SIDES = {"buy": Side.BUY, "sell": Side.SELL}


def recorded_ticks(feed: str, symbol: str, start_ns: int, end_ns: int) -> list[MarketData]:
    """Return the recorded ticks of `symbol` on `feed` with start_ns <= ts_event < end_ns, in order.

    Parameters:
        feed: the feed name.
        symbol: our symbol (BTC-USDT) or the venue's spelling (BTCUSDT).
        start_ns, end_ns: exchange-time bounds, integer UTC nanoseconds, end exclusive.
    Returns:
        MarketData in exchange-time order (then trade id), `symbol` spelled as the venue does.
    Raises:
        feeds.recording.tick_selectors.InstrumentNotFound when the feed has no such instrument.
    """
    if end_ns < start_ns:
        raise ValueError(f"end_ns {end_ns} is before start_ns {start_ns}")
    instrument = find_instrument(symbol, feed)
    venue_symbol = instrument.venue_symbol
    return [
        MarketData(
            symbol=venue_symbol,
            price=price,
            volume=volume,
            ts_event=ts_event,
            ts_recv=ts_recv,
            trade_id=trade_id or None,
            side=_SIDES.get(side),
            duration_since_last_ns=duration,
        )
        for ts_event, price, volume, duration, trade_id, side, ts_recv in iter_tick_values(
            ticks_in_order(instrument, start_ns, end_ns)
        )
    ]


arecorded_ticks = database_sync_to_async(recorded_ticks)
