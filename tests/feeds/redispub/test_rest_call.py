"""Which REST call serves a channel's current value during fallback (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from feeds.distribution.redispub.fallback import newest, rest_call
from feeds.market import MarkPrice, parse_fixed
from feeds.venues import get_venue
from feeds.venues.base import HttpRequest
from tests.feeds.factories import trade


class MarkPriceRestVenue:
    """A venue module that adds the optional `latest_request` / `parse_latest` pair."""

    def latest_request(self, channel: str, symbol: str, settings: Mapping[str, object]) -> HttpRequest | None:
        if channel != "mark_price":
            return None
        return HttpRequest("GET", f"{settings['rest_url']}/premiumIndex", {"symbol": symbol})

    def parse_latest(self, channel: str, body: bytes, symbol: str, received_ns: int) -> list[MarkPrice]:
        return [MarkPrice(symbol=symbol, mark_price=parse_fixed(body.decode()), ts_event=1, ts_recv=received_ns)]


def test_trades_fall_back_to_the_newest_trade_of_the_history_endpoint() -> None:
    call = rest_call(get_venue("binance-usdm"), "trades", "BTCUSDT", {"rest_url": "http://127.0.0.1:9"})
    assert call is not None
    assert call.request.url == "http://127.0.0.1:9/fapi/v1/aggTrades"
    assert dict(call.request.params) == {"symbol": "BTCUSDT", "limit": "1"}


def test_a_channel_without_a_rest_source_has_no_fallback() -> None:
    assert rest_call(get_venue("binance-usdm"), "mark_price", "BTCUSDT", {}) is None
    assert rest_call(get_venue("simulated"), "trades", "BTCUSDT", {}) is None


def test_a_venue_can_serve_other_channels_through_latest_request() -> None:
    venue = MarkPriceRestVenue()
    call = rest_call(venue, "mark_price", "BTCUSDT", {"rest_url": "http://127.0.0.1:9"})
    assert call is not None and call.request.params == {"symbol": "BTCUSDT"}
    (event,) = call.parse(b"96700.5", 42)
    assert (event.mark_price, event.ts_recv) == (parse_fixed("96700.5"), 42)
    assert rest_call(venue, "funding", "BTCUSDT", {}) is None


def test_newest_picks_the_latest_event_of_the_channel_and_symbol() -> None:
    events = [trade(3, ts_ms=30), trade(1, ts_ms=50), trade(2, ts_ms=40, symbol="ETHUSDT")]
    chosen = newest(events, "btcusdt", "trades")  # type: ignore[arg-type]
    assert chosen is not None and chosen.trade_id == "1"
    assert newest(events, "BTCUSDT", "mark_price") is None  # type: ignore[arg-type]
