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
import time
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
# (group, message) pairs: what most pushes are, sent together by `group_send_many`.
Messages = list[tuple[str, dict[str, Any]]]


class _LoopSender:
    """The pushes handed to one event loop, sent in order by one task.

    The message pushes queued together (the commits of a batch of entries, or several
    commits while the previous send was on its way) go out in one `group_send_many`.
    """

    def __init__(self) -> None:
        self.queue: deque[tuple[Send | Messages, str]] = deque()
        self.task: asyncio.Task[None] | None = None

    def add(self, send: Send | Messages, what: str) -> None:  # on the loop
        self.queue.append((send, what))
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self.queue:
            send, what = self.queue.popleft()
            try:
                if callable(send):
                    await send()
                    continue
                messages = list(send)
                while self.queue and not callable(self.queue[0][0]):
                    more, _ = self.queue.popleft()
                    messages.extend(more)  # type: ignore[arg-type]  # not callable: a message list
                layer = get_channel_layer()
                if layer is not None:
                    await group_send_many(layer, messages)
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
    _after_commit(send, what)


def messages_after_commit(messages: Messages, what: str) -> None:
    """Send (group, message) pairs once the surrounding transaction commits, like `send_after_commit`.

    On the caller's loop, messages queued together share their Redis round trips.
    """
    if messages:
        _after_commit(messages, what)


def _after_commit(send: Send | Messages, what: str) -> None:
    loop = CALLER_LOOP.get()

    def dispatch() -> None:
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(_sender(loop).add, send, what)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        try:
            if callable(send):
                async_to_sync(send)()
            else:
                layer = get_channel_layer()
                if layer is not None:
                    async_to_sync(group_send_many)(layer, send)
        except Exception:
            log.warning("orders: %s failed", what, exc_info=True)

    transaction.on_commit(dispatch)


_GROUP_SEND_LUA = """
    local over_capacity = 0
    local current_time = ARGV[#ARGV - 1]
    local expiry = ARGV[#ARGV]
    for i=1,#KEYS do
        if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
            redis.call('ZADD', KEYS[i], current_time, ARGV[i])
            redis.call('EXPIRE', KEYS[i], expiry)
        else
            over_capacity = over_capacity + 1
        end
    end
    return over_capacity
"""


def _batches_on_redis(layer: Any) -> bool:
    try:
        from channels_redis.core import RedisChannelLayer  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - channels_redis is a runtime requirement
        return False
    return isinstance(layer, RedisChannelLayer) and all(
        hasattr(layer, name)
        for name in ("_group_key", "connection", "consistent_hash", "_map_channel_keys_to_connection")
    )


async def group_send_many(layer: Any, messages: Messages) -> None:
    """`layer.group_send` for each (group, message) in order, in two Redis round trips per connection.

    With channels_redis's core layer, the members of every group are read in one
    pipeline, then each message is added to its channels by the layer's own script, all
    of one connection's in one pipeline, in order: the same writes `group_send` makes
    one message at a time (two or four round trips each). Each message is scored later
    than the one before it, so a channel receives them in the order given. Any other
    layer gets one `group_send` per message.
    """
    if not messages:
        return
    if not _batches_on_redis(layer):
        for group, message in messages:
            await layer.group_send(group, message)
        return
    groups: dict[int, list[str]] = {}
    for group in dict.fromkeys(group for group, _ in messages):
        assert layer.require_valid_group_name(group), "Group name not valid"
        groups.setdefault(layer.consistent_hash(group), []).append(group)
    members: dict[str, list[str]] = {}
    oldest_member = int(time.time()) - layer.group_expiry
    for index, names in groups.items():
        pipe = layer.connection(index).pipeline(transaction=False)
        for group in names:
            key = layer._group_key(group)
            pipe.zremrangebyscore(key, min=0, max=oldest_member)
            pipe.zrange(key, 0, -1)
        results = await pipe.execute()
        for position, group in enumerate(names):
            members[group] = [name.decode("utf8") for name in results[2 * position + 1]]
    pipes: dict[int, Any] = {}
    score = 0.0
    oldest_message = int(time.time()) - int(layer.expiry)
    for group, message in messages:
        channel_names = members[group]
        if not channel_names:
            continue
        by_connection, key_message, key_capacity = layer._map_channel_keys_to_connection(channel_names, message)
        score = max(time.time(), score + 1e-6)
        for index, keys in by_connection.items():
            pipe = pipes.get(index)
            if pipe is None:
                pipe = pipes[index] = layer.connection(index).pipeline(transaction=False)
            for key in keys:
                pipe.zremrangebyscore(key, min=0, max=oldest_message)
            args = [key_message[key] for key in keys] + [key_capacity[key] for key in keys] + [score, layer.expiry]
            pipe.eval(_GROUP_SEND_LUA, len(keys), *keys, *args)
    for pipe in pipes.values():
        await pipe.execute()


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
    messages_after_commit(
        [(user_group(owner_id), {"type": TRADE_EVENT, **event})], f"trade event push to user {owner_id}"
    )


def push_trade_events_on_commit(events: list[tuple[int, dict[str, Any]]]) -> None:
    """`push_trade_event_on_commit` for several (owner, event) pairs: one after-commit send, in order."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    messages_after_commit(
        [(user_group(owner_id), {"type": TRADE_EVENT, **event}) for owner_id, event in events],
        f"trade event push to {len(events)} users",
    )
