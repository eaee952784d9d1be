"""The tick CSV format, and its one reader: recorded trades as text lines.

`manage.py exportticks` writes it, the `replay` venue plays it (one line is one frame)
and `manage.py backtest --ticks` reads it; docs/tick-csv.md is the format's page.

    ts_ms,symbol,price,volume[,trade_id[,side[,ts_ns]]]
    1732924800123,BTC-USDT,96712.4,0.015,2435013397,sell,1732924800123456789

A file starts with the header line (the four names, or more for the optional columns).
Prices and volumes are exact decimal strings, read into fixed point without float. A
price is above zero. A volume is zero or more: zero is a price print without traded
volume (a recorded cold-start tick, an Upstox last-price update), which moves the last
price and adds nothing to volume, in a replay and in a backtest alike; a negative
volume is refused. Blank lines are skipped.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from core.fixed_point import fixed_to_str
from feeds.market import FeedData, MarketData, MarketEvent, Side
from feeds.venues.base import ParseError
from feeds.venues.construct import make_trade
from feeds.venues.errors import DECODE_FAILURES, MAX_FIXED, as_parse_error, checked_price, checked_size, checked_symbol
from feeds.venues.numbers import checked_ns, fixed, ms_to_ns

HEADER = "ts_ms,symbol,price,volume"
_SIDES = {"buy": Side.BUY, "sell": Side.SELL, "": None}


class TickFileError(ValueError):
    """A tick file that is not in the format; the message names the file and the line."""


def parse_tick_line(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the trade of one line (`received_ns` its ts_recv); the header line gives none.

    Raises ParseError, its reason a metric label, for a line outside the format.
    """
    try:
        line = frame.decode().rstrip("\r\n")
        if line == HEADER or line.startswith(HEADER + ","):
            return []
        columns = line.split(",")
        if not 4 <= len(columns) <= 7:
            raise ParseError("schema", f"expected 4 to 7 columns, got {len(columns)}")
        ts_ms_text, symbol, price, volume, *extra = columns
        checked_symbol(symbol)
        ts_event = ms_to_ns(int(ts_ms_text))
        if len(extra) == 3 and extra[2]:
            ts_ns = checked_ns(int(extra[2]))
            if ts_ns // 1_000_000 * 1_000_000 != ts_event:
                raise ParseError("schema", "ts_ns disagrees with ts_ms")
            ts_event = ts_ns
        side_text = extra[1] if len(extra) >= 2 else ""
        if side_text not in _SIDES:
            raise ParseError("schema", f"unknown side {side_text!r}")
        value, amount = fixed(price), fixed(volume)
        if not (0 < value <= MAX_FIXED and 0 <= amount <= MAX_FIXED):
            checked_price(value)
            checked_size(amount, "volume")  # zero is a volume: a recorded cold-start tick has none
        # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side), positional.
        return [
            make_trade(
                symbol,
                value,
                amount,
                ts_event,
                received_ns,
                (extra[0] or None) if extra else None,
                _SIDES[side_text],
            )
        ]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def frame_from_tick(tick: MarketData) -> bytes:
    """Return the replay frame that parses back to `tick` (times, numbers, id and side)."""
    return (
        f"{tick.ts_event // 1_000_000},{tick.symbol},{fixed_to_str(tick.price)},{fixed_to_str(tick.volume)},"
        f"{tick.trade_id or ''},{tick.side.value if tick.side else ''},{tick.ts_event}"
    ).encode()


def _check_header(path: str | Path, first: bytes) -> None:
    header = first.rstrip(b"\r\n").decode("utf-8", "replace").replace(" ", "")
    if header != HEADER and not header.startswith(HEADER + ","):
        raise TickFileError(f"{path}: line 1: expected header {HEADER}, got {header!r}")


async def tick_file_frames(path: Path) -> AsyncIterator[bytes]:
    """Yield the lines of a tick file after its header, read lazily (local files read fast)."""
    with path.open("rb") as stream:
        _check_header(path, stream.readline())
        for line in stream:
            line = line.rstrip(b"\r\n")
            if line:
                yield line


def read_tick_csv(
    path: str | Path,
    *,
    feed: str,
    batch_ticks: int = 256,
    clock_ns: Callable[[], int] = time.time_ns,
) -> Iterator[FeedData]:
    """Yield the file's ticks in file order as FeedData batches of at most `batch_ticks`.

    Each batch's ticks are received (ts_recv) when the batch is read. Raises
    TickFileError naming the line of the first row outside the format.
    """
    with open(path, "rb") as stream:
        _check_header(path, stream.readline())
        batch: list[MarketData] = []
        received_ns = clock_ns()
        for number, line in enumerate(stream, start=2):
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            try:
                batch.extend(parse_tick_line(line, received_ns))  # type: ignore[arg-type]
            except ParseError as exc:
                raise TickFileError(f"{path}: line {number}: {exc}") from None
            if len(batch) >= batch_ticks:
                yield FeedData(feed, tuple(batch))
                batch = []
                received_ns = clock_ns()
        if batch:
            yield FeedData(feed, tuple(batch))
