"""A tick tape: a backtest's ticks as columns (times, prices, volumes), read from a tick CSV by pyarrow.

A strategy that folds columns (`StrategyLogic.fold_columns`) reads these lists as they
are, so a backtest builds no MarketData per tick. The numbers stay exact: a price or
volume column is parsed by pyarrow as a decimal with SCALE_DIGITS places and its
unscaled 128-bit integers are read straight from the array's buffer, never through
float.

The columnar reader accepts only the plain form the tick CSV writer produces (digits,
an optional point and at most SCALE_DIGITS decimals, times in the 2000..2100 range,
sides buy/sell/empty). A file with anything else is read by the format's own line
reader (feeds.venues.tick_csv), which accepts or refuses it exactly as the other
commands do and names the line of an error; its ticks then become the same tape.
"""

from __future__ import annotations

import gc
import itertools
import operator
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.fixed_point import SCALE_DIGITS
from feeds.market import FeedData, MarketData, Side
from feeds.venues.construct import make_trade
from feeds.venues.numbers import MAX_TS_NS, MIN_TS_NS
from feeds.venues.tick_csv import HEADER, TickFileError, read_tick_csv

_NS_PER_MS = 1_000_000
_COLUMNS = ("ts_ms", "symbol", "price", "volume", "trade_id", "side", "ts_ns")
# The tick CSV writer's number form; MAX_WHOLE_DIGITS (18) whole digits keep it in range.
_PLAIN_NUMBER = rf"^[0-9]{{1,18}}(\.[0-9]{{1,{SCALE_DIGITS}}})?$"
_SIDES = {"buy": Side.BUY, "sell": Side.SELL, "": None}


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a tape is replayed.

    A tape is a few lists of a million numbers each, and the rows a fold appends are
    tuples freed as soon as their chunk is done: no cycle is made, but each automatic
    collection would walk the whole tape again (measured: a third of a run's time).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class TickTape:
    """Ticks in file order as columns; `symbol_ids[i]` indexes `symbols` (None: one symbol only)."""

    feed: str
    symbols: list[str]  # in order of first appearance
    symbol_ids: list[int] | None
    times: list[int]  # exchange time, ns
    prices: list[int]  # fixed point
    volumes: list[int]  # fixed point
    trade_ids: list[str | None] | None = None
    sides: list[Side | None] | None = None
    received_ns: int = 0

    def __len__(self) -> int:
        return len(self.times)

    def symbol_of(self, index: int) -> str:
        return self.symbols[0] if self.symbol_ids is None else self.symbols[self.symbol_ids[index]]

    def in_time_order(self) -> bool:
        """Whether exchange times never go backwards along the file."""
        times = self.times
        return all(map(operator.le, times, itertools.islice(times, 1, None)))

    def positions(self, symbol_id: int) -> list[int] | None:
        """The tape indices of one symbol's ticks; None when the tape has one symbol."""
        if self.symbol_ids is None:
            return None
        return [i for i, s in enumerate(self.symbol_ids) if s == symbol_id]

    def tick(self, index: int) -> MarketData:
        """The tick at `index` as the object the live path carries."""
        return make_trade(
            self.symbol_of(index),
            self.prices[index],
            self.volumes[index],
            self.times[index],
            self.received_ns,
            None if self.trade_ids is None else self.trade_ids[index],
            None if self.sides is None else self.sides[index],
        )

    def batches(self, batch_ticks: int = 256) -> Iterator[FeedData]:
        """The tape as the replay batches the line reader yields (the straightforward path)."""
        for start in range(0, len(self), batch_ticks):
            yield FeedData(self.feed, tuple(self.tick(i) for i in range(start, min(start + batch_ticks, len(self)))))


def tape_from_batches(batches: Iterable[FeedData], *, feed: str) -> TickTape:
    """Collect replay batches (their trades, in order) into a tape."""
    ids: dict[str, int] = {}
    symbol_ids: list[int] = []
    times: list[int] = []
    prices: list[int] = []
    volumes: list[int] = []
    trade_ids: list[str | None] = []
    sides: list[Side | None] = []
    received = 0
    for batch in batches:
        for event in batch.events:
            if not isinstance(event, MarketData):
                continue
            symbol_ids.append(ids.setdefault(event.symbol, len(ids)))
            times.append(event.ts_event)
            prices.append(event.price)
            volumes.append(event.volume)
            trade_ids.append(event.trade_id)
            sides.append(event.side)
            received = received or event.ts_recv
    return TickTape(
        feed=feed,
        symbols=list(ids),
        symbol_ids=symbol_ids if len(ids) > 1 else None,
        times=times,
        prices=prices,
        volumes=volumes,
        trade_ids=trade_ids if any(t is not None for t in trade_ids) else None,
        sides=sides if any(s is not None for s in sides) else None,
        received_ns=received,
    )


def read_tick_tape(path: str | Path, *, feed: str) -> TickTape:
    """Read a tick CSV into a tape; raises TickFileError as the line reader does."""
    try:
        with open(path, "rb") as stream:
            first = stream.readline()
    except OSError as exc:
        raise TickFileError(f"{path}: {exc.strerror or exc}") from None
    names = first.rstrip(b"\r\n").decode("utf-8", "replace").replace(" ", "").split(",")
    tape = None
    with collector_paused():
        if ",".join(names[:4]) == HEADER and len(names) <= len(_COLUMNS) and names == list(_COLUMNS[: len(names)]):
            tape = _read_columns(path, names, feed)
        if tape is None:  # not the plain form: the line reader accepts or refuses it, naming the line
            tape = tape_from_batches(read_tick_csv(path, feed=feed, batch_ticks=4096), feed=feed)
    return tape


def _read_columns(path: str | Path, names: list[str], feed: str) -> TickTape | None:
    """The tape of a file in the plain form, or None when any value is outside it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    types: dict[str, Any] = {
        "ts_ms": pa.int64(),
        "symbol": pa.dictionary(pa.int32(), pa.string()),
        "price": pa.string(),
        "volume": pa.string(),
        "trade_id": pa.string(),
        "side": pa.string(),
        "ts_ns": pa.int64(),
    }
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(quote_char=False, escape_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={name: types[name] for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, OSError):
        return None
    if table.num_rows == 0 or any(table.column(name).null_count for name in ("ts_ms", "symbol", "price", "volume")):
        return None
    ts_ms = table.column("ts_ms").combine_chunks()
    times_array = pc.multiply(ts_ms, _NS_PER_MS)  # in range below, so no overflow
    if "ts_ns" in names:
        ts_ns = table.column("ts_ns").combine_chunks()
        agrees = pc.equal(pc.multiply(pc.divide(ts_ns, _NS_PER_MS), _NS_PER_MS), times_array)
        if not pc.all(pc.or_kleene(pc.is_null(ts_ns), agrees)).as_py():
            return None
        times_array = pc.if_else(pc.is_null(ts_ns), times_array, ts_ns)
    bounds = pc.min_max(times_array).as_py()
    if bounds["min"] < MIN_TS_NS or bounds["max"] >= MAX_TS_NS:
        return None
    symbol = table.unify_dictionaries().column("symbol").combine_chunks()
    symbols = symbol.dictionary.to_pylist()
    if "" in symbols:
        return None
    numbers = []
    for name in ("price", "volume"):
        text = table.column(name).combine_chunks()
        if not pc.all(pc.match_substring_regex(text, _PLAIN_NUMBER)).as_py():
            return None
        numbers.append(_unscaled(pc.cast(text, pa.decimal128(30, SCALE_DIGITS))))
    prices, volumes = numbers
    if min(prices) <= 0:  # a price is above zero; the line reader names the line that is not
        return None
    sides: list[Side | None] | None = None
    if "side" in names:
        side_text = table.column("side").combine_chunks()
        if not pc.all(pc.is_in(side_text, value_set=pa.array(list(_SIDES)))).as_py():
            return None
        sides = [_SIDES[s] for s in side_text.to_pylist()]
    trade_ids: list[str | None] | None = None
    if "trade_id" in names:
        trade_ids = [t or None for t in table.column("trade_id").combine_chunks().to_pylist()]
    symbol_ids = None
    if len(symbols) > 1:  # numbered in order of first appearance, whatever the dictionary's order
        raw = symbol.indices.to_pylist()
        order: dict[int, int] = {}
        for code in raw:
            if code not in order:
                order[code] = len(order)
                if len(order) == len(symbols):
                    break
        identity = len(order) == len(symbols) and list(order) == list(range(len(order)))
        symbols = [symbols[code] for code in order]
        symbol_ids = raw if identity else [order[code] for code in raw]
    return TickTape(
        feed=feed,
        symbols=symbols,
        symbol_ids=symbol_ids,
        times=_int64_list(times_array),
        prices=prices,
        volumes=volumes,
        trade_ids=trade_ids if trade_ids and any(trade_ids) else None,
        sides=sides if sides and any(s is not None for s in sides) else None,
        received_ns=time.time_ns(),
    )


def _int64_list(array: Any) -> list[int]:
    """The values of an int64 array without nulls, read from its buffer (a third of `to_pylist`'s time)."""
    if sys.byteorder != "little" or array.null_count:
        return list(array.to_pylist())
    words = memoryview(array.buffers()[1]).cast("B")
    start = array.offset * 8
    values: list[int] = words[start : start + len(array) * 8].cast("q").tolist()
    return values


def _unscaled(array: Any) -> list[int]:
    """The unscaled integers of a decimal128 array (its values times 10**scale), exactly."""
    if sys.byteorder != "little":  # the buffer words below are little-endian
        return [int(value.scaleb(SCALE_DIGITS)) for value in array.to_pylist()]
    words = memoryview(array.buffers()[1]).cast("B")
    start, count = array.offset * 16, len(array)
    words = words[start : start + count * 16]
    low: list[int] = words.cast("Q")[0::2].tolist()
    import pyarrow.compute as pc

    largest = pc.max(array).as_py()
    if largest is None or int(largest.scaleb(SCALE_DIGITS)) < 2**64:  # no high word (18.4 million at 12 places)
        return low
    high: list[int] = words.cast("q")[1::2].tolist()
    return [lo + (hi << 64) for lo, hi in zip(low, high, strict=True)]
