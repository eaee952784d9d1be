"""Fan-out of the merged feed to its consumers, so a slow consumer cannot stall the feed.

Each consumer gets a bounded queue and its own task; `publish` never awaits. At
capacity the batch is shed for that consumer only, counted (feed_consumer_overflow_total),
and warned about (at most once per interval per consumer). A consumer for which a gap
changes what it decides (the processor: a strategy folding a gapped stream trades on
a market it did not see) subscribes with `on_overflow`, which receives every batch it
sheds, so it can degrade what the gap affects instead of going on unaware. The queues
and the shedding are the shared hub's (feeds.distribution.hub, policy `Shed`).

Every shed is also shown, not only counted: once a health board is attached, a
consumer that sheds is DEGRADED on health as `fanout:NAME` from its first shed, with
how many batches it shed (refreshed by `watch` every second, so the publisher's hot
path only counts), while it keeps shedding (the `feed_consumer_shedding` gauge is 1), and HEALTHY
again with its running total once it has kept up for `quiet_s`. The dashboard's
health panel lists the component like every other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from core.health import HealthBoard, Status
from feeds.distribution.hub import Hub, Shed
from feeds.market import FeedData
from feeds.metrics import CONSUMER_OVERFLOW, CONSUMER_QUEUE_DEPTH, CONSUMER_SHEDDING

Consumer = Callable[[FeedData], Awaitable[None]]
OverflowHandler = Callable[[FeedData], None]
DEFAULT_CAPACITY = 1024
# A consumer that has shed nothing for this long is keeping up again.
DEFAULT_QUIET_S = 5.0


def health_component(consumer: str) -> str:
    return f"fanout:{consumer}"


class FeedFanout(Hub[FeedData]):
    def __init__(
        self,
        *,
        warn_interval_s: float = 10.0,
        quiet_s: float = DEFAULT_QUIET_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            name="fanout",
            subscriber="consumer",
            unit="batches",
            shed_counter=CONSUMER_OVERFLOW,
            warn_interval_s=warn_interval_s,
        )
        self._quiet_s = quiet_s
        self._monotonic = monotonic
        self._health: HealthBoard | None = None
        # consumer -> (when its current run of sheds began, its total before that run)
        self._shedding_since: dict[str, tuple[float, int]] = {}
        self._last_shed: dict[str, float] = {}

    def attach_health(self, health: HealthBoard) -> None:
        """Show every consumer's shedding on `health` (see the module docstring)."""
        self._health = health

    def shedding(self) -> dict[str, int]:
        """Consumers shedding now, with the batches shed in the current run."""
        return {name: self.overflows[name] - before for name, (_, before) in self._shedding_since.items()}

    def _shed(self, name: str) -> None:
        super()._shed(name)
        now = self._monotonic()
        self._last_shed[name] = now
        if name not in self._shedding_since:
            self._shedding_since[name] = (now, self.overflows[name] - 1)
            CONSUMER_SHEDDING.labels(name).set(1)
            self._show(name, now)

    def review(self) -> None:
        """Refresh the shedding consumers' health; one that has kept up for `quiet_s` is healthy again."""
        now = self._monotonic()
        for name in list(self._shedding_since):
            if now - self._last_shed[name] >= self._quiet_s:
                del self._shedding_since[name]
                CONSUMER_SHEDDING.labels(name).set(0)
                if self._health is not None:
                    self._health.set(
                        health_component(name),
                        Status.HEALTHY,
                        f"keeping up again; {self.overflows.get(name, 0)} batches shed since start",
                    )
            else:
                self._show(name, now)

    async def watch(self, every_s: float = 1.0) -> None:
        """`review` every `every_s`, for the life of the process."""
        while True:
            await asyncio.sleep(every_s)
            self.review()

    def _show(self, name: str, now: float) -> None:
        if self._health is None:
            return
        since, before = self._shedding_since[name]
        queue = self._queues.get(name)
        capacity = f" (queue full at {queue.maxsize})" if queue is not None else ""
        self._health.set(
            health_component(name),
            Status.DEGRADED,
            f"shedding: {self.overflows[name] - before} batches shed in the last {now - since:.0f} s{capacity}; "
            f"{self.overflows[name]} since start",
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
