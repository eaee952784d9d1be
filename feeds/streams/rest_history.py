"""Trade history over a venue's REST API, for gap recovery: a TradeHistorySource.

Venues that page by time (Binance aggTrades: startTime/endTime < 1 h) are asked per
recovery window, then by id when a window holds more than a page. Venues that page by
id only (bitFlyer executions: newest first, `after`/`before`) are walked backwards from
the newest trade down to the checkpoint. Venues with time bounds and no id cursor
(Dzengi aggTrades) continue a full page from the time of its last trade. Every page takes a REST token first.

A page is parsed row by row: a row that is not a valid trade is refused (counted in
`feed_recovery_rows_refused_total{venue,reason}` and logged with its id) and the rest
of the page recovered. Paging continues from the ids of every row the venue sent, the
refused ones included, so a bad row is walked past, never asked for again in a loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import aiohttp

from feeds.market import MarketData
from feeds.metrics import RECOVERY_ROWS_REFUSED
from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.streams.window_planner import TradeRecoveryWindow
from feeds.venues.base import TradeHistoryVenue, TradeQuery
from feeds.venues.rest import fetch_trade_page
from feeds.venues.trade_page import TradePage

log = logging.getLogger(__name__)

DEFAULT_MAX_PAGES = 2000  # per window: a runaway loop must end


def _numeric_id(trade: MarketData) -> int:
    return int(trade.trade_id) if trade.trade_id and trade.trade_id.isdigit() else -1


class RecoveryPagingError(RuntimeError):
    """The venue kept answering full pages past the page budget."""


class RestTradeHistory:
    def __init__(
        self,
        venue: TradeHistoryVenue,
        settings: Mapping[str, object],
        *,
        limiter: VenueRateLimiter | None = None,
        timeout_s: float = 10.0,
        max_pages: int = DEFAULT_MAX_PAGES,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._venue = venue
        self._settings = settings
        self._limiter = limiter
        self._timeout_s = timeout_s
        self._max_pages = max_pages
        self._clock_ns = clock_ns
        self._session: aiohttp.ClientSession | None = None
        self.pages = 0
        self.refused = 0

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch_window(self, window: TradeRecoveryWindow, after: MarketData | None) -> Sequence[MarketData]:
        """Return the window's trades, oldest first (id-paged venues: everything after `after`)."""
        if self._venue.max_window_ms is not None:
            return await self._by_time(window)
        return await self._by_id(window, after)

    async def _page(self, query: TradeQuery) -> TradePage:
        if self._limiter is not None:
            await self._limiter.acquire_rest()
        if self._session is None:
            self._session = aiohttp.ClientSession()
        self.pages += 1
        page = await fetch_trade_page(
            self._venue, query, self._settings, self._clock_ns(), session=self._session, timeout_s=self._timeout_s
        )
        for row in page.refused:
            self.refused += 1
            RECOVERY_ROWS_REFUSED.labels(self._venue.name, row.reason).inc()
            log.warning(
                "gap recovery %s %s: refused trade %s of a REST page (%s); the rest of the page is recovered",
                self._venue.name,
                query.symbol,
                row.trade_id if row.trade_id is not None else "(no id)",
                row.detail,
            )
        return page

    async def _by_time(self, window: TradeRecoveryWindow) -> list[MarketData]:
        limit = self._venue.max_page_size
        end_ns = (window.end_time + 1) * 1_000_000  # end_time is inclusive, in ms
        page = await self._page(
            TradeQuery(window.symbol, start_ms=window.start_time, end_ms=window.end_time, limit=limit)
        )
        trades = list(page.trades)
        if not getattr(self._venue, "pages_by_id", True):
            return await self._by_time_only(window, page, trades)
        for _ in range(self._max_pages):
            if page.rows < limit:
                return trades
            if page.max_id is None:
                raise RecoveryPagingError(f"{window.symbol}: a full page with no readable trade id to continue from")
            # More than a page in the window: continue by id, without time bounds.
            page = await self._page(TradeQuery(window.symbol, after_id=page.max_id, limit=limit))
            inside = [trade for trade in page.trades if trade.ts_event < end_ns]
            trades.extend(inside)
            if len(inside) < len(page.trades):
                return trades
        raise RecoveryPagingError(f"{window.symbol}: more than {self._max_pages} pages in one window")

    async def _by_time_only(
        self, window: TradeRecoveryWindow, page: TradePage, trades: list[MarketData]
    ) -> list[MarketData]:
        """Continue a full page from its last trade's millisecond (Dzengi has no id cursor).

        That millisecond is asked again, so trades sharing it are not lost; the ones
        already returned are dropped here by id (the consistency layer would drop them too).
        """
        limit = self._venue.max_page_size
        for _ in range(self._max_pages):
            if page.rows < limit:
                return trades
            if not trades:
                raise RecoveryPagingError(f"{window.symbol}: a full page with no readable trade to continue from")
            start_ms = trades[-1].ts_event // 1_000_000
            last_id = _numeric_id(trades[-1])
            page = await self._page(TradeQuery(window.symbol, start_ms=start_ms, end_ms=window.end_time, limit=limit))
            fresh = [trade for trade in page.trades if _numeric_id(trade) > last_id]
            if page.rows == limit and not fresh:
                # A whole page inside one millisecond: time bounds cannot get past it.
                raise RecoveryPagingError(f"{window.symbol}: more than {limit} trades at {start_ms} ms")
            trades.extend(fresh)
        raise RecoveryPagingError(f"{window.symbol}: more than {self._max_pages} pages in one window")

    async def _by_id(self, window: TradeRecoveryWindow, after: MarketData | None) -> list[MarketData]:
        if after is None or after.trade_id is None or not after.trade_id.isdigit():
            return []
        limit = self._venue.max_page_size
        after_id, before_id = int(after.trade_id), None
        pages: list[list[MarketData]] = []
        for _ in range(self._max_pages):
            page = await self._page(TradeQuery(window.symbol, after_id=after_id, before_id=before_id, limit=limit))
            pages.append(page.trades)
            if page.rows < limit:
                # Pages came newest first; each page itself is oldest first.
                return [trade for older in reversed(pages) for trade in older]
            if page.min_id is None:
                raise RecoveryPagingError(f"{window.symbol}: a full page with no readable trade id to continue from")
            before_id = page.min_id
        raise RecoveryPagingError(f"{window.symbol}: more than {self._max_pages} pages after id {after.trade_id}")
