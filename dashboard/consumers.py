"""The dashboard websocket: refuses anonymous users, joins the market and per-user groups.

Everything a group sends goes through a per-browser outbox (dashboard.conflation):
prices and strategy outputs are conflated to the latest row per instrument and sent at
most once per DASHBOARD_BROWSER_INTERVAL_S; signals, prompts, orders and control changes
keep their order. The browser acknowledges each batch; one that stops acknowledging
(a stalled tab, a dead network) is closed with CLOSE_STALLED instead of having pushes
piled up for it without bound. Strategy rows reach only users whose accounts trade
that strategy.

A logout ends the sockets of that session: each socket also joins its session's group,
and django.contrib.auth's user_logged_out (sent before the session is flushed) tells
that group to close with CLOSE_UNAUTHENTICATED, so a stream never outlives its login.

Browser message types: "prices", "strategy.output" (processor.publishing outputs),
"strategy.signal", "prompt" (recovery.push), "trade" (orders.events), and any other
app's type unchanged. Apps need no handler method here: `dispatch` relays every group
message; add a line to BROWSER_TYPES only to rename a type for the browser.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.http import HttpRequest

from core.push_groups import MARKET_GROUP, user_group
from dashboard import metrics
from dashboard.conflation import BrowserOutbox

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_STALLED = 4408
# Which strategies a user may see changes rarely; re-read it this often (and at once
# on a "dashboard.controls" message).
VISIBLE_STRATEGIES_REFRESH_S = 10.0
# Channel-layer message type -> the type the browser sees, where they differ.
BROWSER_TYPES = {"recovery.prompt": "prompt", "orders.trade": "trade"}
SESSION_ENDED = "dashboard.session_ended"


def session_group(session_key: str) -> str:
    """The group of one login session's sockets; the key itself never leaves the process."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


@receiver(user_logged_out, dispatch_uid="dashboard-close-sockets-on-logout")
def close_sockets_on_logout(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    layer = get_channel_layer()
    if not session_key or layer is None:
        return
    try:
        async_to_sync(layer.group_send)(session_group(session_key), {"type": SESSION_ENDED})
    except Exception:  # the logout itself stands; such a socket stays open until it reconnects (refused)
        log.warning("dashboard: could not tell the sockets of a logged-out session", exc_info=True)


def _dumps(message: dict[str, Any]) -> str:
    return orjson.dumps(message, default=str).decode()


class DashboardConsumer(AsyncWebsocketConsumer):
    groups_joined: list[str]
    outbox: BrowserOutbox | None = None
    clock: Callable[[], float] = staticmethod(time.monotonic)

    async def connect(self) -> None:
        self.groups_joined = []
        self._flush_task: asyncio.Task[None] | None = None
        self._visible_read_at = float("-inf")
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept first so the browser sees our close code instead of a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user_id = user.pk
        self.outbox = BrowserOutbox(
            interval_s=settings.DASHBOARD_BROWSER_INTERVAL_S, max_unacked=settings.DASHBOARD_MAX_UNACKED_PUSHES
        )
        await self._refresh_visible_strategies()
        self.groups_joined = [MARKET_GROUP, user_group(user.pk)]
        session = self.scope.get("session")
        if session is not None and session.session_key:
            self.groups_joined.append(session_group(session.session_key))
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        metrics.WS_CONNECTIONS.inc()

    async def disconnect(self, code: int) -> None:
        if self._flush_task is not None:
            self._flush_task.cancel()
        if self.groups_joined:
            metrics.WS_CONNECTIONS.dec()
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The browser only acknowledges batches: {"type": "ack", "seq": n}; anything else is ignored."""
        if self.outbox is None or not text_data:
            return
        try:
            message = orjson.loads(text_data)
            if message.get("type") == "ack":
                self.outbox.ack(int(message["seq"]))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            return
        if self.outbox.pending:
            self._schedule_flush()

    # -- group messages ------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Route websocket.* to the handlers; every group message goes to the outbox.

        Apps push their own message types (orders, ledger, prompts); an unknown type is
        relayed as it is rather than crashing the consumer (Channels' default).
        """
        if message["type"].startswith("websocket."):
            await super().dispatch(message)
            return
        if self.outbox is None:
            return
        if message["type"] == SESSION_ENDED:
            self.outbox = None
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if message["type"] in BROWSER_TYPES:
            message = {**message, "type": BROWSER_TYPES[message["type"]]}
        elif message["type"] == "dashboard.controls":
            # A control changed: which strategies this user sees may have too.
            self._visible_read_at = float("-inf")
        await self._refresh_visible_strategies()
        self.outbox.offer(message)
        self._schedule_flush()

    async def _refresh_visible_strategies(self) -> None:
        now = self.clock()
        if self.outbox is None or now - self._visible_read_at < VISIBLE_STRATEGIES_REFRESH_S:
            return
        self._visible_read_at = now
        from dashboard.selectors import visible_strategy_ids

        self.outbox.visible_strategies = await database_sync_to_async(visible_strategy_ids)(user_id=self.user_id)

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        outbox = self.outbox
        assert outbox is not None
        while outbox.pending:
            if outbox.stalled:
                log.warning("dashboard: closing the socket of user %s: browser stopped acknowledging", self.user_id)
                metrics.WS_STALLED.inc()
                self.outbox = None  # drop what is queued; the browser resyncs when it reconnects
                await self.close(code=CLOSE_STALLED)
                return
            wait_s = outbox.wait_s(self.clock())
            if wait_s > 0:
                await asyncio.sleep(wait_s)
                continue
            conflated_before = outbox.stats.rows_conflated
            batch = outbox.take(self.clock())
            metrics.WS_BATCHES.inc()
            metrics.WS_ROWS_CONFLATED.inc(outbox.stats.rows_conflated - conflated_before)
            for message in batch:
                await self.send(text_data=_dumps(message))
