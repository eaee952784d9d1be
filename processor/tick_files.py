"""Tick files: CSV with header `ts_ms,symbol,price,volume`, as `manage.py exportticks` writes.

Prices and volumes are exact decimal strings, read into fixed point without float.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

from feeds.market import FeedData, FixedPointError, MarketData, parse_fixed

HEADER = ["ts_ms", "symbol", "price", "volume"]
_NS_PER_MS = 1_000_000
# Prices and volumes repeat a lot (a tick size, round lots): parse each spelling once.
_CACHE_LIMIT = 100_000


class TickFileError(ValueError):
    """A tick file that is not in the expected format; the message names the line."""


def read_tick_csv(path: str | Path, *, feed: str, batch_ticks: int = 256) -> Iterator[FeedData]:
    """Yield the file's ticks in file order as FeedData batches of at most `batch_ticks`."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [name.strip() for name in header] != HEADER:
            raise TickFileError(f"{path}: line 1: expected header {','.join(HEADER)}, got {header}")
        numbers: dict[str, int] = {}
        batch: list[MarketData] = []
        line = 1
        try:
            for line, (ts_ms, symbol, price_text, volume_text) in enumerate(reader, start=2):
                price = numbers.get(price_text)
                if price is None:
                    if len(numbers) > _CACHE_LIMIT:
                        numbers.clear()
                    price = numbers[price_text] = parse_fixed(price_text)
                volume = numbers.get(volume_text)
                if volume is None:
                    volume = numbers[volume_text] = parse_fixed(volume_text)
                if price <= 0 or volume < 0:
                    raise TickFileError(f"{path}: line {line}: price must be positive and volume not negative")
                ts = int(ts_ms) * _NS_PER_MS
                batch.append(MarketData(symbol, price, volume, ts, ts))
                if len(batch) >= batch_ticks:
                    yield FeedData(feed, tuple(batch))
                    batch = []
        except (ValueError, FixedPointError) as exc:
            if isinstance(exc, TickFileError):
                raise
            raise TickFileError(f"{path}: line {line}: {exc}") from None
        if batch:
            yield FeedData(feed, tuple(batch))
