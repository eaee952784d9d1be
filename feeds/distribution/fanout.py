"""Fan-out of the merged feed to its consumers, so a slow consumer cannot stall the feed.

Each consumer gets a bounded queue and its own task; `publish` never awaits. At
capacity the batch is shed for that consumer only, counted (feed_consumer_overflow_total),
and warned about (at most once per interval per consumer). A consumer for which a gap
changes what it decides (the processor: a strategy folding a gapped stream trades on
a market it did not see) subscribes with `on_overflow`, which receives every batch it
sheds, so it can degrade what the gap affects instead of going on unaware. The queues
and the shedding are the shared hub's (feeds.distribution.hub, policy `Shed`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from feeds.distribution.hub import Hub, Shed
from feeds.market import FeedData
from feeds.metrics import CONSUMER_OVERFLOW, CONSUMER_QUEUE_DEPTH

Consumer = Callable[[FeedData], Awaitable[None]]
OverflowHandler = Callable[[FeedData], None]
DEFAULT_CAPACITY = 1024


class FeedFanout(Hub[FeedData]):
    def __init__(self, *, warn_interval_s: float = 10.0) -> None:
        super().__init__(
            name="fanout",
            subscriber="consumer",
            unit="batches",
            shed_counter=CONSUMER_OVERFLOW,
            warn_interval_s=warn_interval_s,
        )

    def subscribe(
        self,
        name: str,
        capacity: int = DEFAULT_CAPACITY,
        *,
        on_overflow: OverflowHandler | None = None,
    ) -> asyncio.Queue[FeedData]:
        """Register a consumer queue; the caller drains it (see `drain`).

        `on_overflow(batch)` is called (on the publisher's side, without awaiting) with
        each batch the full queue sheds.
        """
        return self.add(name, Shed(capacity, on_overflow))

    def unsubscribe(self, name: str) -> None:
        self.remove(name)


async def drain(name: str, queue: asyncio.Queue[FeedData], consume: Consumer) -> None:
    """Feed every queued batch to `consume`, one at a time, forever."""
    depth = CONSUMER_QUEUE_DEPTH.labels(name)
    while True:
        batch = await queue.get()
        depth.set(queue.qsize())
        await consume(batch)
