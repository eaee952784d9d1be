"""Fan-out of the merged feed to its consumers, so a slow consumer cannot stall the feed.

Each consumer gets a bounded queue and its own task; `publish` never awaits. At
capacity the batch is shed for that consumer only, counted (feed_consumer_overflow_total),
and warned about (at most once per interval per consumer). A consumer for which a gap
changes what it decides (the processor: a strategy folding a gapped stream trades on
a market it did not see) subscribes with `on_overflow`, which receives every batch it
sheds, so it can degrade what the gap affects instead of going on unaware.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from feeds.market import FeedData
from feeds.metrics import CONSUMER_OVERFLOW, CONSUMER_QUEUE_DEPTH

log = logging.getLogger(__name__)

Consumer = Callable[[FeedData], Awaitable[None]]
OverflowHandler = Callable[[FeedData], None]
DEFAULT_CAPACITY = 1024


class FeedFanout:
    def __init__(self, *, warn_interval_s: float = 10.0) -> None:
        self._queues: dict[str, asyncio.Queue[FeedData]] = {}
        self._on_overflow: dict[str, OverflowHandler] = {}
        self.overflows: dict[str, int] = {}
        self._last_warned: dict[str, float] = {}
        self._warn_interval_s = warn_interval_s

    def subscribe(
        self, name: str, capacity: int = DEFAULT_CAPACITY, *, on_overflow: OverflowHandler | None = None,
    ) -> asyncio.Queue[FeedData]:
        """Register a consumer queue; the caller drains it (see `drain`).

        `on_overflow(batch)` is called (on the publisher's side, without awaiting) with
        each batch the full queue sheds.
        """
        if name in self._queues:
            raise ValueError(f"consumer {name!r} is already subscribed")
        queue: asyncio.Queue[FeedData] = asyncio.Queue(capacity)
        self._queues[name] = queue
        self.overflows[name] = 0
        if on_overflow is not None:
            self._on_overflow[name] = on_overflow
        return queue

    def unsubscribe(self, name: str) -> None:
        self._queues.pop(name, None)
        self._on_overflow.pop(name, None)

    def publish(self, batch: FeedData) -> None:
        for name, queue in self._queues.items():
            try:
                queue.put_nowait(batch)
            except asyncio.QueueFull:
                self._overflow(name)
                handler = self._on_overflow.get(name)
                if handler is not None:
                    handler(batch)

    def _overflow(self, name: str) -> None:
        self.overflows[name] += 1
        CONSUMER_OVERFLOW.labels(name).inc()
        now = time.monotonic()
        if now - self._last_warned.get(name, -self._warn_interval_s) >= self._warn_interval_s:
            self._last_warned[name] = now
            log.warning("fanout: consumer %s is full, %d batches shed so far", name, self.overflows[name])


async def drain(name: str, queue: asyncio.Queue[FeedData], consume: Consumer) -> None:
    """Feed every queued batch to `consume`, one at a time, forever."""
    depth = CONSUMER_QUEUE_DEPTH.labels(name)
    while True:
        batch = await queue.get()
        depth.set(queue.qsize())
        await consume(batch)
