"""Runs the paper exchange's matching on live ticks and hands its fills to the lifecycle.

Subscribed to the feed fan-out as "paper-broker". A batch is matched only when one of
its symbols has resting paper orders (a set refreshed on each local placement and
every `refresh_s`), so a busy feed costs no query per batch. A fill that arrives
before its order row is persisted is retried on the next batches, then left to
reconciliation.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from channels.db import database_sync_to_async

from feeds.market import FeedData, MarketData
from orders import lifecycle
from orders.brokers.base import BrokerFill
from orders.brokers.paper import PaperFees, paper_match, paper_open_symbols

log = logging.getLogger(__name__)
PENDING_LIMIT = 1024
PENDING_RETRY_S = 30.0


class PaperMatcher:
    def __init__(self, *, fees: PaperFees, refresh_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._fees = fees
        self._refresh_s = refresh_s
        self._clock = clock
        self._open_symbols: set[str] = set()
        self._refreshed_at = float("-inf")
        self._pending: deque[tuple[float, str, BrokerFill]] = deque(maxlen=PENDING_LIMIT)
        self.fills_applied = 0
        self._stopped = False
        self._matching = asyncio.Lock()

    async def stop(self) -> None:
        """Stop matching, as the exchange closes with the site; returns once a batch being matched is done.

        The final reconciliation at a clean stop then reads a book that no longer moves.
        """
        self._stopped = True
        async with self._matching:
            return

    def order_placed(self, symbol: str) -> None:
        """Called by the paper broker after a placement in this process."""
        self._open_symbols.add(symbol)

    async def consume(self, batch: FeedData) -> None:
        async with self._matching:
            if not self._stopped:
                await self._consume(batch)

    async def _consume(self, batch: FeedData) -> None:
        now = self._clock()
        if now - self._refreshed_at >= self._refresh_s:
            self._open_symbols = await database_sync_to_async(paper_open_symbols)()
            self._refreshed_at = now
        ticks = [
            event for event in batch.events if isinstance(event, MarketData) and event.symbol in self._open_symbols
        ]
        if ticks:
            for account_key, fill in await database_sync_to_async(paper_match)(ticks, fees=self._fees):
                self._pending.append((now, account_key, fill))
        if self._pending:
            await self._apply_pending(now)

    async def _apply_pending(self, now: float) -> None:
        retry: list[tuple[float, str, BrokerFill]] = []
        while self._pending:
            first_seen, account_key, fill = self._pending.popleft()
            applied = await database_sync_to_async(lifecycle.lifecycle_apply_fill)(
                account_id=int(account_key), fill=fill
            )
            if applied:
                self.fills_applied += 1
            elif now - first_seen < PENDING_RETRY_S and not await database_sync_to_async(_already_applied)(
                int(account_key), fill.exchange_trade_id
            ):
                retry.append((first_seen, account_key, fill))
        self._pending.extend(retry)


def _already_applied(account_id: int, trade_id: str) -> bool:
    from orders.models import Fill

    return Fill.objects.filter(account_id=account_id, exchange_trade_id=trade_id).exists()
