"""Conflated price pushes to browsers over the channel layer.

Ticks only update the latest value per instrument; every interval one message with
the instruments that changed goes to the `market` group, so a browser gets at most
1 / interval updates per instrument however fast the venue trades. A full snapshot
goes out every `full_every_s` so a freshly opened dashboard fills in quickly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from channels.layers import BaseChannelLayer

from core.fixed_point import fixed_to_str
from core.log_throttle import FailureLog
from core.push_groups import MARKET_GROUP
from feeds.market import FeedData, MarketData

log = logging.getLogger(__name__)


@dataclass
class _Latest:
    feed: str
    symbol: str
    price: int
    open_price: int
    volume: int
    ticks: int
    ts_event: int


class PricePublisher:
    """Keeps the latest price per instrument and pushes changes on an interval."""

    def __init__(
        self,
        layer: BaseChannelLayer,
        symbols: Mapping[tuple[str, str], str],
        *,
        interval_s: float,
        full_every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._layer = layer
        self._symbols = symbols  # (feed, venue symbol) -> our symbol
        self._interval_s = interval_s
        self._full_every_s = full_every_s
        self._clock = clock
        self._latest: dict[tuple[str, str], _Latest] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._last_full = float("-inf")
        self.messages_sent = 0
        self._push_failures = FailureLog(log, "publisher: push to browsers", monotonic=clock)

    async def consume(self, batch: FeedData) -> None:
        """Fold one feed batch into the latest values (no I/O)."""
        for event in batch.events:
            if not isinstance(event, MarketData):
                continue  # the dashboard shows trade prices; mark prices and quotes are not folded
            key = (batch.feed, event.symbol)
            latest = self._latest.get(key)
            if latest is None:
                symbol = self._symbols.get(key, event.symbol)
                latest = self._latest[key] = _Latest(batch.feed, symbol, event.price, event.price, 0, 0, 0)
            latest.price = event.price
            latest.volume += event.volume
            latest.ticks += 1
            latest.ts_event = event.ts_event
            self._dirty.add(key)

    def take_message(self) -> dict[str, Any] | None:
        """Return the next conflated push, or None when nothing changed."""
        now = self._clock()
        full = now - self._last_full >= self._full_every_s
        keys = self._latest.keys() if full else self._dirty
        if not keys:
            return None
        if full:
            self._last_full = now
        prices = [self._row(self._latest[key]) for key in sorted(keys)]
        self._dirty = set()
        return {"type": "market.prices", "prices": prices}

    @staticmethod
    def _row(latest: _Latest) -> dict[str, Any]:
        return {
            "feed": latest.feed,
            "symbol": latest.symbol,
            "price": fixed_to_str(latest.price),
            "open": fixed_to_str(latest.open_price),
            "volume": fixed_to_str(latest.volume),
            "ticks": latest.ticks,
            "ts_ms": latest.ts_event // 1_000_000,
        }

    async def run(self) -> None:
        """Push conflated updates until cancelled."""
        while True:
            await asyncio.sleep(self._interval_s)
            message = self.take_message()
            if message is None:
                continue
            try:
                await self._layer.group_send(MARKET_GROUP, message)
                self.messages_sent += 1
            except Exception as exc:
                # A push that fails (Redis blip) is replaced by the next one; never stop the feed.
                self._push_failures.failed(exc)
            else:
                self._push_failures.succeeded("pushing to browsers again")
