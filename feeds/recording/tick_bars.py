"""Candles (OHLCV bars) of recorded ticks, bucketed by the database.

One aggregate query per call, the same SQL on PostgreSQL and SQLite: ticks of one
instrument in a time range are grouped by `ts_event / bucket_ns` (integer division on
both), giving low, high, volume, trade count and the first and last exchange times of
each bucket; open and close are the prices of the first and last tick of the bucket,
read by an index probe each (instrument, ts_event), so the cost is one range scan of
the index plus two probes per bar. Ties on the same exchange time are broken as
`ticks_in_order` breaks them: trade id in numeric order, then insertion order.

Buckets are aligned to the Unix epoch (a 1 h bar starts on the UTC hour).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.db import DatabaseError, connection, transaction

from feeds.models import Tick

# Ticks are grouped in one query; the caller bounds the range (bars x bucket).
_BARS_SQL = """
SELECT b.bucket, b.low, b.high, b.volume, b.trades,
  (SELECT t.price FROM {table} t WHERE t.instrument_id = %(instrument)s AND t.ts_event = b.first_ts
   ORDER BY length(t.trade_id), t.trade_id, t.id LIMIT 1) AS open_price,
  (SELECT t.price FROM {table} t WHERE t.instrument_id = %(instrument)s AND t.ts_event = b.last_ts
   ORDER BY length(t.trade_id) DESC, t.trade_id DESC, t.id DESC LIMIT 1) AS close_price
FROM (
  SELECT ts_event / CAST(%(bucket)s AS bigint) AS bucket, min(ts_event) AS first_ts, max(ts_event) AS last_ts,
    min(price) AS low, max(price) AS high, {volume_sum}(volume) AS volume, count(*) AS trades
  FROM {table}
  WHERE instrument_id = %(instrument)s AND ts_event >= %(start)s AND ts_event < %(end)s
  GROUP BY ts_event / CAST(%(bucket)s AS bigint)
) b
ORDER BY b.bucket
"""


@dataclass(frozen=True)
class TickBar:
    """One bucket's candle; prices and volume fixed point (core.fixed_point.SCALE)."""

    start_ns: int
    open: int
    high: int
    low: int
    close: int
    volume: int
    trades: int


def _int(value: int | Decimal | float) -> int:
    return int(value)


BarRow = tuple[int, int, int, int, int, int, int]


def bars_summed(run: Callable[[str], Sequence[BarRow]], bucket_ns: int) -> list[TickBar]:
    """The bars of `run(volume_sum)`'s rows (bucket, low, high, volume, trades, open, close), oldest first.

    SQLite's exact SUM raises once a bucket's volume leaves int64 (9.2 million units at
    12 places); its float total() still draws the bar, so there the query runs again with it.
    """
    try:
        rows = run("sum")
    except DatabaseError:
        if connection.vendor != "sqlite":
            raise
        rows = run("total")
    return [
        TickBar(
            start_ns=_int(bucket) * bucket_ns,
            open=_int(open_price),
            high=_int(high),
            low=_int(low),
            close=_int(close_price),
            volume=_int(volume),
            trades=_int(trades),
        )
        for bucket, low, high, volume, trades, open_price, close_price in rows
    ]


def tick_bars(*, instrument_id: int, bucket_ns: int, start_ns: int, end_ns: int) -> list[TickBar]:
    """Return the candles of `instrument_id` in [start_ns, end_ns), one per bucket that has ticks, oldest first.

    Parameters:
        instrument_id: the instrument's primary key.
        bucket_ns: bar length in nanoseconds (positive).
        start_ns, end_ns: exchange-time bounds, UTC ns, end exclusive; the caller keeps
            (end_ns - start_ns) / bucket_ns small (it is the bar count).
    Returns:
        TickBar per non-empty bucket, `start_ns` a multiple of `bucket_ns`.
    """
    if bucket_ns <= 0:
        raise ValueError(f"bucket_ns must be positive, not {bucket_ns}")
    if end_ns <= start_ns:
        return []
    params = {"instrument": instrument_id, "bucket": bucket_ns, "start": start_ns, "end": end_ns}
    return bars_summed(lambda volume_sum: _run(params, volume_sum=volume_sum), bucket_ns)


def _run(params: dict[str, int], *, volume_sum: str) -> list[tuple[int, int, int, int, int, int, int]]:
    sql = _BARS_SQL.format(table=connection.ops.quote_name(Tick._meta.db_table), volume_sum=volume_sum)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The planner's row estimate of a wide range crosses jit_above_cost, and
            # compiling the aggregate then costs more than running it.
            cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        return list(cursor.fetchall())
