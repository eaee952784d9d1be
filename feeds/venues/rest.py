"""Run the REST requests the venue modules describe as `HttpRequest` data.

The venue modules build requests and parse responses with pure functions; this is the
one place that does the I/O, with aiohttp. A caller passes its own session to reuse
connections (and to point tests at a local server through the feed's `rest_url`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import aiohttp

from feeds.market import MarketData
from feeds.venues.base import ExchangeVenue, HttpRequest, InstrumentMeta, TradeHistoryVenue, TradeQuery
from feeds.venues.trade_page import TradePage, whole_page

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
# Venue error bodies can be large HTML pages; keep what fits in a log line.
_ERROR_BODY_CHARS = 300


class RestError(Exception):
    """A venue answered with an HTTP error status (429/418 = rate limited or banned)."""

    def __init__(self, status: int, url: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} from {url}: {body[:_ERROR_BODY_CHARS]!r}")
        self.status = status
        self.url = url
        self.body = body

    @property
    def rate_limited(self) -> bool:
        return self.status in (418, 429)


async def fetch(
    request: HttpRequest,
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> bytes:
    """Send `request` and return the response body; raise RestError on a non-2xx status."""
    if session is None:
        async with aiohttp.ClientSession() as own_session:
            return await fetch(request, session=own_session, timeout_s=timeout_s)
    async with session.request(
        request.method,
        request.url,
        params=dict(request.params) or None,
        headers=dict(request.headers) or None,
        data=request.body,
        timeout=aiohttp.ClientTimeout(total=timeout_s),
    ) as response:
        body = await response.read()
        if not 200 <= response.status < 300:
            raise RestError(response.status, str(response.url), body)
        return body


async def fetch_instruments(
    venue: ExchangeVenue,
    settings: Mapping[str, object],
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[InstrumentMeta]:
    """Return the venue's instrument metadata."""
    body = await fetch(venue.instruments_request(settings), session=session, timeout_s=timeout_s)
    return venue.parse_instruments(body)


async def fetch_trades(
    venue: TradeHistoryVenue,
    query: TradeQuery,
    settings: Mapping[str, object],
    received_ns: int,
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[MarketData]:
    """Return one page of historical trades, oldest first, stamped `received_ns`."""
    body = await fetch(venue.trades_request(query, settings), session=session, timeout_s=timeout_s)
    return venue.parse_trades(body, query.symbol, received_ns)


async def fetch_trade_page(
    venue: TradeHistoryVenue,
    query: TradeQuery,
    settings: Mapping[str, object],
    received_ns: int,
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> TradePage:
    """`fetch_trades`, row by row: a bad row is refused on its own (see feeds.venues.trade_page)."""
    body = await fetch(venue.trades_request(query, settings), session=session, timeout_s=timeout_s)
    parse_page = getattr(venue, "parse_trade_page", None)
    if parse_page is None:  # a venue without a row-by-row parser: its page is whole or refused
        return whole_page(venue.parse_trades(body, query.symbol, received_ns))
    page: TradePage = parse_page(body, query.symbol, received_ns)
    return page
