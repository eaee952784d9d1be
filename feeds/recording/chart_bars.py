"""Candles for a chart: from the minute rollup when the bar is whole minutes, else from the ticks.

A bar of whole minutes (1m, 5m, 15m, 1h, ...) merges the minute candles
(feeds.recording.minute_candles) of the full minutes in range, so its cost follows the
bar count, not the ticks behind it; the still-open minute at `end_ns` (only part of it
in range) is aggregated from its ticks and merged into the last bar. Sub-minute bars
read the ticks (feeds.recording.tick_bars). Both give the same bars for the same ticks.
"""

from __future__ import annotations

from django.db import connection, transaction

from feeds.recording.minute_candles import NS_PER_MINUTE, TABLE
from feeds.recording.tick_bars import TickBar, bars_summed, tick_bars

_CANDLE_BARS_SQL = """
SELECT b.bucket, b.low, b.high, b.volume, b.trades,
  (SELECT m.open FROM {table} m WHERE m.instrument_id = %(instrument)s AND m.minute = b.first_minute) AS open_price,
  (SELECT m.close FROM {table} m WHERE m.instrument_id = %(instrument)s AND m.minute = b.last_minute) AS close_price
FROM (
  SELECT minute / CAST(%(minutes)s AS bigint) AS bucket, min(minute) AS first_minute, max(minute) AS last_minute,
    min(low) AS low, max(high) AS high, {volume_sum}(volume) AS volume, sum(trades) AS trades
  FROM {table}
  WHERE instrument_id = %(instrument)s AND minute >= %(start)s AND minute < %(end)s
  GROUP BY minute / CAST(%(minutes)s AS bigint)
) b
ORDER BY b.bucket
"""


def chart_bars(*, instrument_id: int, bucket_ns: int, start_ns: int, end_ns: int) -> list[TickBar]:
    """Return the candles of `instrument_id` in [start_ns, end_ns), one per bucket with ticks, oldest first.

    The same answer as feeds.recording.tick_bars.tick_bars for the same arguments.
    """
    if bucket_ns <= 0 or bucket_ns % NS_PER_MINUTE or start_ns % NS_PER_MINUTE:
        return tick_bars(instrument_id=instrument_id, bucket_ns=bucket_ns, start_ns=start_ns, end_ns=end_ns)
    if end_ns <= start_ns:
        return []
    open_minute_ns = max(start_ns, end_ns // NS_PER_MINUTE * NS_PER_MINUTE)
    bars = _candle_bars(instrument_id, bucket_ns, start_ns // NS_PER_MINUTE, open_minute_ns // NS_PER_MINUTE)
    if open_minute_ns < end_ns:
        for partial in tick_bars(
            instrument_id=instrument_id, bucket_ns=bucket_ns, start_ns=open_minute_ns, end_ns=end_ns
        ):
            bars = _merge_last(bars, partial)
    return bars


def _merge_last(bars: list[TickBar], later: TickBar) -> list[TickBar]:
    """`later` (ticks after every candle of `bars`) folded into the bar of its bucket."""
    if not bars or bars[-1].start_ns != later.start_ns:
        return [*bars, later]
    last = bars[-1]
    merged = TickBar(
        start_ns=last.start_ns,
        open=last.open,
        high=max(last.high, later.high),
        low=min(last.low, later.low),
        close=later.close,
        volume=last.volume + later.volume,
        trades=last.trades + later.trades,
    )
    return [*bars[:-1], merged]


def _candle_bars(instrument_id: int, bucket_ns: int, start_minute: int, end_minute: int) -> list[TickBar]:
    if end_minute <= start_minute:
        return []
    params = {
        "instrument": instrument_id,
        "minutes": bucket_ns // NS_PER_MINUTE,
        "start": start_minute,
        "end": end_minute,
    }
    return bars_summed(lambda volume_sum: _run(params, volume_sum=volume_sum), bucket_ns)


def _run(params: dict[str, int], *, volume_sum: str) -> list[tuple[int, int, int, int, int, int, int]]:
    sql = _CANDLE_BARS_SQL.format(table=connection.ops.quote_name(TABLE), volume_sum=volume_sum)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        return list(cursor.fetchall())
