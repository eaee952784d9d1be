"""bitflyer: JSON-RPC subscribe requests, exact numbers from JSON numbers, /v1/executions."""

from __future__ import annotations

import json

import pytest

from feeds.market import Side, Ticker, parse_fixed
from feeds.venues import bitflyer
from feeds.venues.base import ParseError, TradeQuery
from feeds.venues.rest import fetch_instruments, fetch_trades
from tests.feeds.venues import golden
from tests.feeds.venues.fake_http import FakeVenueHttp

VENUE = bitflyer.VENUE
FIXTURES = golden.FIXTURES / "bitflyer"


async def test_one_connection_subscribes_each_channel_with_a_json_rpc_request() -> None:
    (endpoint,) = await VENUE.endpoints(["BTC_JPY", "FX_BTC_JPY"], {"trades", "ticker"}, {})
    assert endpoint.url == "wss://ws.lightstream.bitflyer.com/json-rpc"
    requests = [json.loads(message) for message in endpoint.subscribe]
    assert [request["params"]["channel"] for request in requests] == [
        "lightning_ticker_BTC_JPY",
        "lightning_ticker_FX_BTC_JPY",
        "lightning_executions_BTC_JPY",
        "lightning_executions_FX_BTC_JPY",
    ]
    assert all(request["jsonrpc"] == "2.0" and request["method"] == "subscribe" for request in requests)
    assert len({request["id"] for request in requests}) == len(requests)


def test_prices_written_as_json_numbers_are_exact_and_never_floats() -> None:
    frame = (
        b'{"jsonrpc":"2.0","method":"channelMessage","params":{"channel":"lightning_executions_BTC_JPY",'
        b'"message":[{"id":1,"side":"BUY","price":0.30000000,"size":0.1,"exec_date":"2026-09-23T10:44:33.5470000Z"}]}}'
    )
    (trade,) = VENUE.parse(frame, 0)
    # 0.1 as a float is 0.1000000000000000055...; exact decoding keeps the venue's digits.
    assert trade.price == parse_fixed("0.3") and trade.volume == parse_fixed("0.1")  # type: ignore[union-attr]


def test_taker_side_is_the_aggressor_and_itayose_has_none() -> None:
    events = [event for frame in golden.read_frames("bitflyer")[1:5] for event in VENUE.parse(frame, 0)]
    assert [event.side for event in events] == [Side.BUY, Side.BUY, Side.SELL, None, Side.SELL]  # type: ignore[union-attr]


def test_exec_date_keeps_all_seven_fractional_digits() -> None:
    (trade,) = VENUE.parse(golden.read_frames("bitflyer")[2], 0)
    assert trade.ts_event % 1_000_000_000 == 13_123_400


def test_ticker_without_a_bid_reports_none_not_zero() -> None:
    (ticker,) = VENUE.parse(golden.read_frames("bitflyer")[6], 0)
    assert isinstance(ticker, Ticker)
    assert ticker.best_bid is None and ticker.best_ask == parse_fixed("13640100")


def test_executions_request_pages_by_id_not_time() -> None:
    request = VENUE.trades_request(TradeQuery("BTC_JPY", after_id=2690216240, before_id=2690216243, limit=500), {})
    assert request.url == "https://api.bitflyer.com/v1/executions"
    assert dict(request.params) == {
        "product_code": "BTC_JPY",
        "after": "2690216240",
        "before": "2690216243",
        "count": "500",
    }
    with pytest.raises(ValueError):
        VENUE.trades_request(TradeQuery("BTC_JPY", start_ms=1), {})


def test_executions_response_comes_back_oldest_first_with_times_without_z() -> None:
    trades = VENUE.parse_trades((FIXTURES / "rest_executions.json").read_bytes(), "BTC_JPY", 3)
    assert [trade.trade_id for trade in trades] == ["2690216241", "2690216242"]
    assert trades[0].ts_event % 1_000_000_000 == 900_000_000
    assert trades[1].price == parse_fixed("13633800")


def test_malformed_executions_response_raises_parse_error() -> None:
    with pytest.raises(ParseError):
        VENUE.parse_trades(b'{"status":-1,"error_message":"Invalid product"}', "BTC_JPY", 3)


async def test_fetch_trades_and_markets_against_a_local_server(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/v1/executions", (FIXTURES / "rest_executions.json").read_bytes())
    fake_http.serve("GET", "/v1/getmarkets", (FIXTURES / "rest_getmarkets.json").read_bytes())
    settings = VENUE.clean_settings({"rest_url": fake_http.base_url})
    trades = await fetch_trades(VENUE, TradeQuery("BTC_JPY", after_id=2690216240), settings, 3)
    assert [trade.trade_id for trade in trades] == ["2690216241", "2690216242"]
    assert dict(fake_http.requests[0].query) == {"product_code": "BTC_JPY", "after": "2690216240"}
    markets = await fetch_instruments(VENUE, settings)
    assert [meta.venue_symbol for meta in markets][:4] == ["BTC_JPY", "XRP_JPY", "ETH_JPY", "FX_BTC_JPY"]
    assert markets[0].tick_size is None
