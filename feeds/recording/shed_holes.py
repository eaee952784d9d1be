"""Batches the recorder's full fan-out queue shed, written down as known holes.

A shed batch's trades never reach the database; without a record the tape would look
complete where it is not. `ShedHoles.add` (the fan-out's `on_overflow`, on the
publisher's side: no I/O) widens one pending span per (feed, symbol); `flush_forever`
writes each span as a known hole once a second, so a burst of sheds is one row per
symbol rather than one per batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from feeds.market import FeedData, MarketData

log = logging.getLogger(__name__)

HoleSink = Callable[[str, str, int, int, str], Awaitable[None]]
REASON = "recorder queue full: feed batch shed"


class ShedHoles:
    def __init__(self, sink: HoleSink) -> None:
        self._sink = sink
        self._spans: dict[tuple[str, str], tuple[int, int]] = {}
        self.written = 0

    def add(self, batch: FeedData) -> None:
        for event in batch.events:
            if not isinstance(event, MarketData):
                continue
            key = (batch.feed, event.symbol)
            span = self._spans.get(key)
            ts = event.ts_event
            self._spans[key] = (ts, ts) if span is None else (min(span[0], ts), max(span[1], ts))

    async def flush(self) -> None:
        spans, self._spans = self._spans, {}
        for (feed, symbol), (start_ns, end_ns) in spans.items():
            try:
                await self._sink(feed, symbol, start_ns, end_ns, REASON)
                self.written += 1
            except Exception:  # the hole is logged; the feed must go on
                log.exception("recorder: could not record the shed span %s:%s [%d, %d]", feed, symbol, start_ns, end_ns)

    async def flush_forever(self, every_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            await self.flush()
