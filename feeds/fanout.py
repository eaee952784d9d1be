"""Fan-out of the merged feed to its consumers, so a slow consumer cannot stall the feed.

Each consumer gets a bounded queue and its own task; `publish` never awaits. At
capacity the batch is dropped for that consumer only, counted, and warned about
(at most once per interval per consumer).
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
DEFAULT_CAPACITY = 1024


class FeedFanout:
    def __init__(self, *, warn_interval_s: float = 10.0) -> None:
        self._queues: dict[str, asyncio.Queue[FeedData]] = {}
        self.overflows: dict[str, int] = {}
        self._last_warned: dict[str, float] = {}
        self._warn_interval_s = warn_interval_s

    def subscribe(self, name: str, capacity: int = DEFAULT_CAPACITY) -> asyncio.Queue[FeedData]:
        """Register a consumer queue; the caller drains it (see `drain`)."""
        if name in self._queues:
            raise ValueError(f"consumer {name!r} is already subscribed")
        queue: asyncio.Queue[FeedData] = asyncio.Queue(capacity)
        self._queues[name] = queue
        self.overflows[name] = 0
        return queue

    def unsubscribe(self, name: str) -> None:
        self._queues.pop(name, None)

    def publish(self, batch: FeedData) -> None:
        for name, queue in self._queues.items():
            try:
                queue.put_nowait(batch)
            except asyncio.QueueFull:
                self._overflow(name)

    def _overflow(self, name: str) -> None:
        self.overflows[name] += 1
        CONSUMER_OVERFLOW.labels(name).inc()
        now = time.monotonic()
        if now - self._last_warned.get(name, -self._warn_interval_s) >= self._warn_interval_s:
            self._last_warned[name] = now
            log.warning("fanout: consumer %s is full, %d batches dropped so far", name, self.overflows[name])


async def drain(name: str, queue: asyncio.Queue[FeedData], consume: Consumer) -> None:
    """Feed every queued batch to `consume`, one at a time, forever."""
    depth = CONSUMER_QUEUE_DEPTH.labels(name)
    while True:
        batch = await queue.get()
        depth.set(queue.qsize())
        await consume(batch)
