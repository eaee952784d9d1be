"""A tick tape: a backtest's ticks as columns (times, prices, volumes), read from a tick CSV by pyarrow.

A strategy that folds columns (`StrategyLogic.fold_columns`) reads these lists as they
are, so a backtest builds no MarketData per tick; a kind with a whole-column kernel
(`fold_arrays`) reads the int64 arrays the reader leaves, and the lists are then never
made. The numbers stay exact: a price or volume column is parsed by pyarrow as a decimal
with SCALE_DIGITS places and its unscaled 128-bit integers are read straight from the
array's buffer, never through float.

The columnar reader accepts only the plain form the tick CSV writer produces (digits
and at most one point, at most SCALE_DIGITS significant decimals and MAX_WHOLE_DIGITS
whole digits, times in the 2000..2100 range, sides buy/sell/empty). A file with anything
else is read by the format's own line reader (feeds.venues.tick_csv), which accepts or
refuses it exactly as the other commands do and names the line of an error; its ticks
then become the same tape.
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
from functools import cached_property
from pathlib import Path
from typing import Any

from core.fixed_point import MAX_WHOLE_DIGITS, SCALE_DIGITS
from feeds.market import FeedData, MarketData, Side
from feeds.venues.construct import make_trade
from feeds.venues.numbers import MAX_TS_NS, MIN_TS_NS
from feeds.venues.tick_csv import HEADER, TickFileError, read_tick_csv

_NS_PER_MS = 1_000_000
_COLUMNS = ("ts_ms", "symbol", "price", "volume", "trade_id", "side", "ts_ns")
# The tick CSV writer's number form: MAX_WHOLE_DIGITS whole digits and SCALE_DIGITS decimals
# fill the decimal's precision, so a value past FIXED_MAX_ABS does not cast. Longer texts
# (leading zeros, zero tails) go to the line reader, which has its own length limit.
_PRECISION = MAX_WHOLE_DIGITS + SCALE_DIGITS
_MAX_TEXT = MAX_WHOLE_DIGITS + 1 + SCALE_DIGITS
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


# A column of the tape: a list of ints, or an int64 numpy array as the columnar reader
# leaves it (every value of the column fits in 64 bits); lists are made when first asked for.
Column = Any


@dataclass(frozen=True)
class TickTape:
    """Ticks in file order as columns; `symbol_ids[i]` indexes `symbols` (None: one symbol only)."""

    feed: str
    symbols: list[str]  # in order of first appearance
    symbol_ids: list[int] | None
    time_column: Column  # exchange time, ns
    price_column: Column  # fixed point
    volume_column: Column  # fixed point
    trade_ids: list[str | None] | None = None
    sides: list[Side | None] | None = None
    received_ns: int = 0

    @cached_property
    def times(self) -> list[int]:
        return _as_list(self.time_column)

    @cached_property
    def prices(self) -> list[int]:
        return _as_list(self.price_column)

    @cached_property
    def volumes(self) -> list[int]:
        return _as_list(self.volume_column)

    def arrays(self) -> tuple[Any, Any, Any] | None:
        """The times and prices (and volumes, or None) as int64 arrays, or None when not read as arrays."""
        if isinstance(self.time_column, list) or isinstance(self.price_column, list):
            return None
        volumes = None if isinstance(self.volume_column, list) else self.volume_column
        return self.time_column, self.price_column, volumes

    def __len__(self) -> int:
        return len(self.time_column)

    def symbol_of(self, index: int) -> str:
        return self.symbols[0] if self.symbol_ids is None else self.symbols[self.symbol_ids[index]]

    def in_time_order(self) -> bool:
        """Whether exchange times never go backwards along the file."""
        if not isinstance(self.time_column, list):
            column = self.time_column
            return bool((column[1:] >= column[:-1]).all())
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
        time_column=times,
        price_column=prices,
        volume_column=volumes,
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
    pool = _memory_pool()
    try:
        table = pacsv.read_csv(
            path,
            memory_pool=pool,
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
    times_array = pc.multiply(ts_ms, _NS_PER_MS, memory_pool=pool)  # in range below, so no overflow
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
        decimals = _plain_decimals(table.column(name).combine_chunks(memory_pool=pool), pool)
        if decimals is None:
            return None
        numbers.append(_unscaled(decimals))
    prices, volumes = numbers
    if (min(prices) if isinstance(prices, list) else prices.min()) <= 0:  # the line reader names the line
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
        time_column=times_array.to_numpy(),
        price_column=prices,
        volume_column=volumes,
        trade_ids=trade_ids if trade_ids and any(trade_ids) else None,
        sides=sides if sides and any(s is not None for s in sides) else None,
        received_ns=time.time_ns(),
    )


def _as_list(column: Column) -> list[int]:
    if isinstance(column, list):
        return column
    values: list[int] = column.tolist()
    return values


def _memory_pool() -> Any:
    """jemalloc where pyarrow has it: reading a tape allocates ~100 MB of fresh columns, and
    measured here that took a steady 0.19 s against 0.2 to 0.4 s from the default pool."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without it
        return pa.default_memory_pool()


def _plain_decimals(text: Any, pool: Any) -> Any | None:
    """A string column in the plain number form as decimal128 with SCALE_DIGITS places, or None.

    The plain form is digits with at most one point. Every byte of the column is checked
    to be a digit or a point (one pass over its characters) and every value to be 1 to
    MAX_TEXT characters; the cast then refuses a second point, a lone point, more
    significant decimals than SCALE_DIGITS and more than MAX_WHOLE_DIGITS whole digits.
    What passes is a decimal the line reader reads to the same value.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset : text.offset + len(text) + 1]
    lengths = np.diff(offsets)
    if not len(lengths) or lengths.min() < 1 or lengths.max() > _MAX_TEXT:
        return None
    characters = memoryview(text.buffers()[2])[offsets[0] : offsets[-1]]
    if bytes(characters).translate(None, b"0123456789."):
        return None
    try:
        return pc.cast(text, pa.decimal128(_PRECISION, SCALE_DIGITS), memory_pool=pool)
    except pa.ArrowInvalid:
        return None


def _unscaled(array: Any) -> Column:
    """The unscaled integers of a decimal128 array without negatives (its values times 10**scale), exactly.

    An int64 array when every value fits in 63 bits (18.4 million at 12 places: every
    price and most volumes), else a list of Python ints.
    """
    import numpy as np

    if sys.byteorder != "little":  # the buffer words below are little-endian
        return [int(value.scaleb(SCALE_DIGITS)) for value in array.to_pylist()]
    words = np.frombuffer(array.buffers()[1], dtype=np.int64)[2 * array.offset : 2 * (array.offset + len(array))]
    low, high = words[0::2], words[1::2]
    if not high.any() and (not len(low) or low.min() >= 0):
        return low  # a strided view of the decimal buffer: no copy of the column
    unsigned_low = low.view(np.uint64).tolist()
    return [lo + (hi << 64) for lo, hi in zip(unsigned_low, high.tolist(), strict=True)]
