"""binance-usdm: routed endpoints, subscribe messages and the REST helpers against a local server."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from feeds.market import MarketData, Side, parse_fixed
from feeds.venues import binance_usdm
from feeds.venues.base import ParseError, TradeQuery
from feeds.venues.rest import RestError, fetch_instruments, fetch_trades
from tests.feeds.venues import golden
from tests.feeds.venues.fake_http import FakeVenueHttp

VENUE = binance_usdm.VENUE
FIXTURES = golden.FIXTURES / "binance-usdm"


async def test_trades_and_mark_prices_go_to_market_path_and_book_tickers_to_public() -> None:
    endpoints = await VENUE.endpoints(["BTCUSDT", "ETHUSDT"], {"trades", "mark_price", "book_ticker"}, {})
    by_url = {endpoint.url: endpoint for endpoint in endpoints}
    assert set(by_url) == {"wss://fstream.binance.com/market/stream", "wss://fstream.binance.com/public/stream"}
    market = by_url["wss://fstream.binance.com/market/stream"]
    assert set(market.streams) == {
        "btcusdt@aggTrade",
        "ethusdt@aggTrade",
        "btcusdt@markPrice@1s",
        "ethusdt@markPrice@1s",
    }
    assert by_url["wss://fstream.binance.com/public/stream"].streams == ("btcusdt@bookTicker", "ethusdt@bookTicker")


async def test_no_endpoint_uses_the_legacy_paths_that_deliver_nothing() -> None:
    endpoints = await VENUE.endpoints(["BTCUSDT"], {"trades"}, {})
    assert all("/ws" not in endpoint.url and not endpoint.url.endswith(".com/stream") for endpoint in endpoints)


async def test_subscribe_message_is_the_documented_request() -> None:
    (endpoint,) = await VENUE.endpoints(["BTCUSDT"], {"trades"}, {"mark_price_1s": False})
    assert [json.loads(message) for message in endpoint.subscribe] == [
        {"method": "SUBSCRIBE", "params": ["btcusdt@aggTrade"], "id": 1}
    ]


async def test_many_symbols_split_into_connections_of_at_most_1024_streams_and_few_messages() -> None:
    symbols = [f"SYM{number}USDT" for number in range(1500)]
    endpoints = await VENUE.endpoints(symbols, {"trades"}, {})
    assert [len(endpoint.streams) for endpoint in endpoints] == [1024, 476]
    for endpoint in endpoints:
        # 10 incoming messages per second is the venue's limit: subscribing must fit in it.
        assert len(endpoint.subscribe) <= binance_usdm.KEEP_ALIVE.max_incoming_messages_per_s  # type: ignore[operator]
        params = [stream for message in endpoint.subscribe for stream in json.loads(message)["params"]]
        assert params == list(endpoint.streams)
        assert len({json.loads(message)["id"] for message in endpoint.subscribe}) == len(endpoint.subscribe)


async def test_ws_url_setting_replaces_the_base_and_keeps_the_routed_path() -> None:
    settings = VENUE.clean_settings({"ws_url": "ws://127.0.0.1:9999/"})
    (endpoint,) = await VENUE.endpoints(["BTCUSDT"], {"trades"}, settings)
    assert endpoint.url == "ws://127.0.0.1:9999/market/stream"


def test_settings_reject_unknown_keys_and_bad_urls() -> None:
    with pytest.raises(ValidationError) as info:
        VENUE.clean_settings({"ws_url": "fstream.binance.com", "colour": "red"})
    assert set(info.value.message_dict) == {"ws_url", "settings"}


def test_unknown_channel_is_refused() -> None:
    with pytest.raises(ValueError):
        binance_usdm.stream_name("BTCUSDT", "depth")


def test_keep_alive_follows_the_venue_limits() -> None:
    assert binance_usdm.KEEP_ALIVE.max_connection_age_s == 24 * 3600
    assert binance_usdm.KEEP_ALIVE.client_ping_interval_s is None
    assert VENUE.ping_message(1) is None


def test_agg_trades_request_pages_by_id_with_inclusive_from_id() -> None:
    request = VENUE.trades_request(TradeQuery("btcusdt", after_id=2435013398, limit=1000), {})
    assert request.url == "https://fapi.binance.com/fapi/v1/aggTrades"
    assert dict(request.params) == {"symbol": "BTCUSDT", "fromId": "2435013399", "limit": "1000"}


def test_agg_trades_request_by_time_needs_a_window_below_one_hour() -> None:
    request = VENUE.trades_request(TradeQuery("BTCUSDT", start_ms=0, end_ms=3_599_999), {})
    assert dict(request.params) == {"symbol": "BTCUSDT", "startTime": "0", "endTime": "3599999"}
    with pytest.raises(ValueError):
        VENUE.trades_request(TradeQuery("BTCUSDT", start_ms=0, end_ms=3_600_000), {})


def test_agg_trades_request_refuses_id_and_time_together_and_oversized_pages() -> None:
    with pytest.raises(ValueError):
        VENUE.trades_request(TradeQuery("BTCUSDT", after_id=1, start_ms=0), {})
    with pytest.raises(ValueError):
        VENUE.trades_request(TradeQuery("BTCUSDT", limit=1001), {})


def test_agg_trades_response_parses_exactly_with_the_aggressor_side() -> None:
    trades = VENUE.parse_trades((FIXTURES / "rest_aggTrades.json").read_bytes(), "BTCUSDT", 5)
    assert [(t.trade_id, t.price, t.volume, t.side) for t in trades] == [
        ("2435013399", parse_fixed("96712.40"), parse_fixed("0.004"), Side.SELL),
        ("2435013400", parse_fixed("96712.50"), parse_fixed("0.250"), Side.BUY),
        ("2435013401", parse_fixed("96713.00"), parse_fixed("3.100"), Side.BUY),
    ]
    assert trades[0].ts_event == 1732924800412 * 1_000_000
    assert all(t.symbol == "BTCUSDT" and t.ts_recv == 5 for t in trades)


def test_malformed_rest_responses_raise_parse_error() -> None:
    for body in (b"{", b'{"code":-1121,"msg":"Invalid symbol."}', b'[{"a":1,"p":"x","q":"1","T":1,"m":true}]'):
        with pytest.raises(ParseError):
            VENUE.parse_trades(body, "BTCUSDT", 5)


def test_exchange_info_gives_tick_and_step_sizes_from_the_filters_not_the_precisions() -> None:
    instruments = VENUE.parse_instruments((FIXTURES / "rest_exchangeInfo.json").read_bytes())
    by_symbol = {meta.venue_symbol: meta for meta in instruments}
    assert by_symbol["BTCUSDT"].tick_size == "0.10"
    assert by_symbol["BTCUSDT"].lot_size == "0.001"
    assert by_symbol["BTCUSDT"].min_quantity == "0.001"
    assert by_symbol["1000PEPEUSDT"].tick_size == "0.0000001"
    assert by_symbol["BTCUSDT_250328"].status == "settling"


async def test_fetch_trades_asks_the_configured_rest_url_and_parses_the_page(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/fapi/v1/aggTrades", (FIXTURES / "rest_aggTrades.json").read_bytes())
    settings = VENUE.clean_settings({"rest_url": fake_http.base_url})
    trades = await fetch_trades(VENUE, TradeQuery("BTCUSDT", after_id=2435013398), settings, 9)
    assert [trade.trade_id for trade in trades] == ["2435013399", "2435013400", "2435013401"]
    assert all(isinstance(trade, MarketData) for trade in trades)
    (request,) = fake_http.requests
    assert dict(request.query) == {"symbol": "BTCUSDT", "fromId": "2435013399"}


async def test_fetch_instruments_reads_exchange_info(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/fapi/v1/exchangeInfo", (FIXTURES / "rest_exchangeInfo.json").read_bytes())
    instruments = await fetch_instruments(VENUE, {"rest_url": fake_http.base_url})
    assert [meta.venue_symbol for meta in instruments] == ["BTCUSDT", "1000PEPEUSDT", "BTCUSDT_250328"]


async def test_rate_limit_answer_is_a_rest_error_that_says_so(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/fapi/v1/aggTrades", b'{"code":-1003,"msg":"Too many requests"}', status=429)
    with pytest.raises(RestError) as info:
        await fetch_trades(VENUE, TradeQuery("BTCUSDT"), {"rest_url": fake_http.base_url}, 9)
    assert info.value.status == 429 and info.value.rate_limited
