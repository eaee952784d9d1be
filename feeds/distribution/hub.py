"""One bounded pub/sub hub: named subscriptions, a queue each, an overflow policy each.

`publish` never awaits: a slow subscriber must not stall the publisher. What happens
when a subscriber falls behind is its subscription's policy:

- `Shed(capacity, on_overflow)`: a bounded queue; at capacity the item is shed for that
  subscriber only, counted (`overflows`, the hub's shed counter) and warned about at
  most once per interval; `on_overflow(item)` receives each shed item, so a subscriber
  for which a gap changes what it decides can degrade what the gap affects.
- `FailFast(limit)`: nothing is ever dropped (the queue itself is unbounded); a
  subscriber `limit` items behind sets `failure` and the `failed` event once, and the
  owner stops the process instead of acting minutes late or growing without bound.

The feed fan-out (feeds.distribution.fanout) sheds; the processor's signal hub
(processor.signals) fails fast.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Shed(Generic[T]):
    capacity: int
    on_overflow: Callable[[T], None] | None = None


@dataclass(frozen=True)
class FailFast:
    limit: int


class ShedCounter(Protocol):
    """Where a hub counts the items it sheds, per subscriber (a Prometheus counter's shape)."""

    def labels(self, subscriber: str) -> ShedCounter: ...

    def inc(self) -> None: ...


class Hub(Generic[T]):
    """Named subscriptions with their own queues; see the module docstring for the policies.

    `name` and `unit` word the warnings and the failure ("signal subscriber x is 60
    signals behind (limit 50)"); `shed_counter.labels(subscriber).inc()` counts a shed item.
    """

    def __init__(
        self,
        *,
        name: str,
        subscriber: str,
        unit: str,
        shed_counter: ShedCounter | None = None,
        warn_interval_s: float = 10.0,
    ) -> None:
        self._name = name
        self._subscriber = subscriber
        self._unit = unit
        self._shed_counter = shed_counter
        self._warn_interval_s = warn_interval_s
        self._queues: dict[str, asyncio.Queue[T]] = {}
        # Kept apart so `publish` does no per-subscriber dispatch on the policy.
        self._shedding: dict[str, tuple[asyncio.Queue[T], Callable[[T], None] | None]] = {}
        self._limits: dict[str, int] = {}
        self.overflows: dict[str, int] = {}
        self._last_warned: dict[str, float] = {}
        self.failure: str | None = None
        self.failed = asyncio.Event()

    def add(self, name: str, policy: Shed[T] | FailFast) -> asyncio.Queue[T]:
        """Register subscriber `name` and return its queue; the caller drains it."""
        if name in self._queues:
            raise ValueError(f"{self._subscriber} {name!r} is already subscribed")
        queue: asyncio.Queue[T]
        if isinstance(policy, Shed):
            queue = asyncio.Queue(policy.capacity)
            self._shedding[name] = (queue, policy.on_overflow)
            self.overflows[name] = 0
        else:
            queue = asyncio.Queue()  # unbounded: the limit stops the process, never a drop
            self._limits[name] = policy.limit
        self._queues[name] = queue
        return queue

    def remove(self, name: str) -> None:
        self._queues.pop(name, None)
        self._shedding.pop(name, None)
        self._limits.pop(name, None)

    def limit(self, name: str) -> int:
        return self._limits[name]

    def depths(self) -> dict[str, int]:
        """Items each subscriber has not taken yet."""
        return {name: queue.qsize() for name, queue in self._queues.items()}

    def publish(self, item: T) -> None:
        """Hand `item` to every subscriber."""
        for name, (queue, on_overflow) in self._shedding.items():
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self._shed(name)
                if on_overflow is not None:
                    on_overflow(item)
        if self._limits:
            self._fill([item])

    def publish_all(self, items: Iterable[T]) -> None:
        """Hand every one of `items`, in order, to every subscriber."""
        items = list(items)
        for item in items:
            for name, (queue, on_overflow) in self._shedding.items():
                try:
                    queue.put_nowait(item)
                except asyncio.QueueFull:
                    self._shed(name)
                    if on_overflow is not None:
                        on_overflow(item)
        if self._limits:
            self._fill(items)

    def _fill(self, items: list[T]) -> None:
        for name, limit in self._limits.items():
            queue = self._queues[name]
            for item in items:
                queue.put_nowait(item)
            depth = queue.qsize()
            if depth >= limit and self.failure is None:
                self.failure = f"{self._subscriber} {name} is {depth} {self._unit} behind (limit {limit})"
                log.error("%s: %s", self._name, self.failure)
                self.failed.set()

    def _shed(self, name: str) -> None:
        self.overflows[name] += 1
        if self._shed_counter is not None:
            self._shed_counter.labels(name).inc()
        now = time.monotonic()
        if now - self._last_warned.get(name, -self._warn_interval_s) >= self._warn_interval_s:
            self._last_warned[name] = now
            log.warning(
                "%s: %s %s is full, %d %s shed so far",
                self._name,
                self._subscriber,
                name,
                self.overflows[name],
                self._unit,
            )
