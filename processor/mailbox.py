"""Bounded mailboxes between the routing levels, with non-blocking delivery.

Capacity is counted in ticks. `offer` never awaits: it returns False when the items
do not fit, and the caller degrades the route instead of waiting for a slow consumer.
The consumer takes everything queued in one call, so a level processes a backlog as
one batch instead of awaiting per item.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")

# An instrument's mailbox (one execution, waiting while it warms up).
MAILBOX_CAPACITY = 1024
# A route's mailbox (one strategy, every instrument it trades): two turns of a backlog.
ROUTE_MAILBOX_CAPACITY = 16_384


class MailboxClosed(Exception):
    """The mailbox was closed and everything in it has been taken."""


class Mailbox(Generic[T]):
    __slots__ = ("_items", "_waiter", "capacity", "closed", "dropped_closed", "size")

    def __init__(self, capacity: int = MAILBOX_CAPACITY) -> None:
        self.capacity = capacity
        self.size = 0  # ticks queued
        self._items: list[T] = []
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.dropped_closed = 0

    def offer(self, item: T, ticks: int) -> bool:
        """Queue `item` (holding `ticks` ticks); return False, queuing nothing, if it does not fit."""
        if self.closed:
            # A route being torn down: its ticks have nowhere to go, and that is no overflow.
            self.dropped_closed += ticks
            return True
        size = self.size + ticks
        if size > self.capacity:
            return False
        self.size = size
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return True

    async def take(self) -> list[T]:
        """Return everything queued, waiting while empty; raise MailboxClosed once closed and empty."""
        while not self._items:
            if self.closed:
                raise MailboxClosed
            waiter = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            await waiter
        items = self._items
        self._items = []
        self.size = 0
        return items

    def take_nowait(self) -> list[T]:
        """Return everything queued now (possibly nothing)."""
        items = self._items
        if items:
            self._items = []
            self.size = 0
        return items

    def close(self) -> None:
        """Refuse further items; the consumer still gets what is queued, then MailboxClosed."""
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None
