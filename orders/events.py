"""Trade events to the owner's dashboards (group `user.<owner_id>`), after commit only.

A push is a side effect of a committed change, never part of it. When the change was
made on a database thread called from an event loop (the trade executor), the push is
handed to that loop and the thread goes on at once: the group_send (a Redis round trip
with the Redis channel layer) then costs the trade path nothing. Pushes handed to a
loop are sent one after another in commit order, so a dashboard never sees a later
state of an order or signal before an earlier one. Elsewhere (a view, a task) the
push is sent in place.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any
from weakref import WeakKeyDictionary

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from core.push_groups import user_group
from orders.db import CALLER_LOOP

log = logging.getLogger(__name__)

# Relayed by dashboard.consumers.DashboardConsumer.orders_trade.
TRADE_EVENT = "orders.trade"

Send = Callable[[], Awaitable[None]]


class _LoopSender:
    """The pushes handed to one event loop, sent in order by one task."""

    def __init__(self) -> None:
        self.queue: deque[tuple[Send, str]] = deque()
        self.task: asyncio.Task[None] | None = None

    def add(self, send: Send, what: str) -> None:  # on the loop
        self.queue.append((send, what))
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self.queue:
            send, what = self.queue.popleft()
            try:
                await send()
            except Exception:  # a dashboard that misses a push catches up on reload
                log.warning("orders: %s failed", what, exc_info=True)


_senders: WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSender] = WeakKeyDictionary()


def _sender(loop: asyncio.AbstractEventLoop) -> _LoopSender:
    sender = _senders.get(loop)
    if sender is None:
        sender = _senders[loop] = _LoopSender()
    return sender


def send_after_commit(send: Send, what: str) -> None:
    """Run the coroutine function `send` once the surrounding transaction commits (never on rollback).

    On the caller's event loop when there is one, in commit order; else in place.
    Failures are logged: the database keeps the truth.
    """
    loop = CALLER_LOOP.get()

    def dispatch() -> None:
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(_sender(loop).add, send, what)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        try:
            async_to_sync(send)()
        except Exception:
            log.warning("orders: %s failed", what, exc_info=True)

    transaction.on_commit(dispatch)


def push_trade_event_rollback_unsafe(owner_id: int, event: dict[str, Any]) -> None:
    """Send now; a failed push is logged, the database keeps the truth."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(owner_id), {"type": TRADE_EVENT, **event})
    except Exception:  # a dashboard that misses a push catches up on reload
        log.warning("orders: trade event push to user %s failed", owner_id, exc_info=True)


def push_trade_event_on_commit(owner_id: int, event: dict[str, Any]) -> None:
    """Push after the surrounding transaction commits, so a rolled-back trade is never shown."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": TRADE_EVENT, **event}

    async def send() -> None:
        await layer.group_send(user_group(owner_id), message)

    send_after_commit(send, f"trade event push to user {owner_id}")


def push_trade_events_on_commit(events: list[tuple[int, dict[str, Any]]]) -> None:
    """`push_trade_event_on_commit` for several (owner, event) pairs: one after-commit send, in order."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    messages = [(owner_id, {"type": TRADE_EVENT, **event}) for owner_id, event in events]

    async def send() -> None:
        for owner_id, message in messages:
            await layer.group_send(user_group(owner_id), message)

    send_after_commit(send, f"trade event push to {len(messages)} users")
