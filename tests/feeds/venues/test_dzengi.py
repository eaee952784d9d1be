"""dzengi: the message envelope, exact JSON numbers, aggTrades by time, demo endpoints as settings."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from feeds.market import Side, parse_fixed
from feeds.settings_schema import clean_feed_settings
from feeds.venues import dzengi
from feeds.venues.base import ParseError, TradeQuery
from feeds.venues.rest import fetch_instruments, fetch_trades
from tests.feeds.venues import golden
from tests.feeds.venues.fake_http import FakeVenueHttp

VENUE = dzengi.VENUE
FIXTURES = golden.FIXTURES / "dzengi"


async def test_one_connection_subscribes_every_symbol_in_the_envelope() -> None:
    (endpoint,) = await VENUE.endpoints(["BTC/USD", "Oil - Brent"], {"trades"}, {})
    assert endpoint.url == "wss://api-adapter.dzengi.com/connect"
    (request,) = [json.loads(message) for message in endpoint.subscribe]
    assert request == {
        "destination": "trades.subscribe",
        "correlationId": 1,
        "payload": {"symbols": ["BTC/USD", "Oil - Brent"]},
    }
    assert endpoint.streams == ("BTC/USD", "Oil - Brent")
    with pytest.raises(ValueError):
        await VENUE.endpoints(["BTC/USD"], {"mark_price"}, {})


async def test_many_symbols_are_split_over_several_subscribe_requests_with_distinct_ids() -> None:
    symbols = [f"S{n}/USD" for n in range(250)]
    (endpoint,) = await VENUE.endpoints(symbols, {"trades"}, {})
    requests = [json.loads(message) for message in endpoint.subscribe]
    assert [len(r["payload"]["symbols"]) for r in requests] == [100, 100, 50]
    assert [r["correlationId"] for r in requests] == [1, 2, 3]


def test_the_client_pings_inside_the_thirty_seconds_the_venue_allows() -> None:
    assert VENUE.keep_alive.client_ping_interval_s is not None and VENUE.keep_alive.client_ping_interval_s < 30 / 2
    ping = json.loads(VENUE.ping_message(3))  # type: ignore[arg-type]
    assert ping["destination"] == "ping" and ping["payload"] == {}
    assert ping["correlationId"] != 1  # never the id of a subscribe request
    assert VENUE.parse(b'{"status":"OK","correlationId":"1000003","destination":"ping","payload":{}}', 0) == []


def test_prices_written_as_json_numbers_are_exact_and_never_floats() -> None:
    frame = (
        b'{"status":"OK","destination":"internal.trade","payload":{"price":0.30000000,"size":0.1,'
        b'"id":1,"ts":1796000000000,"symbol":"BTC/USD","buyer":true}}'
    )
    (trade,) = VENUE.parse(frame, 0)
    assert trade.price == parse_fixed("0.3") and trade.volume == parse_fixed("0.1")  # type: ignore[union-attr]
    (small,) = VENUE.parse(golden.read_frames("dzengi")[4], 0)
    assert small.price == parse_fixed("0.0001")  # type: ignore[union-attr]  # 1.0E-4 as the venue writes it


def test_buyer_is_the_taker_side() -> None:
    events = [event for frame in golden.read_frames("dzengi")[1:3] for event in VENUE.parse(frame, 0)]
    assert [event.side for event in events] == [Side.BUY, Side.SELL]  # type: ignore[union-attr]


def test_a_trade_naming_an_instrument_id_instead_of_a_symbol_is_refused() -> None:
    with pytest.raises(ParseError) as refused:
        VENUE.parse(golden.read_frames("dzengi")[8], 0)
    assert refused.value.reason == "schema"


def test_an_error_reply_is_a_venue_error_with_its_message() -> None:
    with pytest.raises(ParseError) as refused:
        VENUE.parse(golden.read_frames("dzengi")[9], 0)
    assert refused.value.reason == "venue_error" and "Invalid symbol: BTC/XXX" in str(refused.value)


def test_agg_trades_request_pages_by_time_under_an_hour_never_by_id() -> None:
    request = VENUE.trades_request(TradeQuery("BTC/USD", start_ms=1, end_ms=3_600_000, limit=1000), {})
    assert request.url == "https://api-adapter.dzengi.com/api/v1/aggTrades"
    assert dict(request.params) == {"symbol": "BTC/USD", "startTime": "1", "endTime": "3600000", "limit": "1000"}
    for bad in (
        TradeQuery("BTC/USD", after_id=5),
        TradeQuery("BTC/USD", start_ms=0, end_ms=3_600_000),
        TradeQuery("BTC/USD", start_ms=5, end_ms=4),
        TradeQuery("BTC/USD", limit=1001),
    ):
        with pytest.raises(ValueError):
            VENUE.trades_request(bad, {})


def test_agg_trades_response_is_exact_with_the_maker_flag_turned_into_the_taker_side() -> None:
    trades = VENUE.parse_trades((FIXTURES / "rest_aggTrades.json").read_bytes(), "BTC/USD", 3)
    assert [t.trade_id for t in trades] == ["1582595833", "1582595834", "1582595835"]
    assert [t.side for t in trades] == [Side.BUY, Side.SELL, Side.BUY]
    assert trades[2].price == parse_fixed("8980.5") and trades[2].volume == parse_fixed("0.001")
    assert trades[0].ts_event == 1_580_204_505_793_000_000 and trades[0].ts_recv == 3


@pytest.mark.parametrize(
    "body",
    [
        b'{"code":-1128,"msg":"Invalid symbol: TEST123"}',
        b'[{"a":1,"p":"0","q":"1","T":1580204505793,"m":true}]',
        b'[{"a":1,"p":"1","q":"0.0","T":1580204505793,"m":true}]',
        b"[" * 2000,
    ],
)
def test_a_bad_agg_trades_response_raises_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        VENUE.parse_trades(body, "BTC/USD", 3)


def test_exchange_info_gives_tick_and_lot_sizes_as_exact_text() -> None:
    instruments = VENUE.parse_instruments((FIXTURES / "rest_exchangeInfo.json").read_bytes())
    assert [(m.venue_symbol, m.tick_size, m.lot_size, m.min_quantity, m.status) for m in instruments] == [
        ("BTC/USD", "0.01", "0.0001", "0.0001", "trading"),
        ("BTC/USD_LEVERAGE", "0.05", "0.001", "0.001", "trading"),
        ("Oil - Brent", "0.01", "0.1", "0.1", "break"),
    ]


async def test_fetch_trades_and_instruments_against_a_local_server(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/api/v1/aggTrades", (FIXTURES / "rest_aggTrades.json").read_bytes())
    fake_http.serve("GET", "/api/v1/exchangeInfo", (FIXTURES / "rest_exchangeInfo.json").read_bytes())
    settings = VENUE.clean_settings({"rest_url": fake_http.base_url})
    trades = await fetch_trades(VENUE, TradeQuery("BTC/USD", start_ms=1580204505000, end_ms=1580204507000), settings, 3)
    assert len(trades) == 3
    assert dict(fake_http.requests[0].query) == {
        "symbol": "BTC/USD",
        "startTime": "1580204505000",
        "endTime": "1580204507000",
    }
    assert [m.venue_symbol for m in await fetch_instruments(VENUE, settings)][:1] == ["BTC/USD"]


def test_demo_setting_points_both_endpoints_at_the_demo_account() -> None:
    demo = clean_feed_settings("dzengi", {"demo": True})
    assert demo["ws_url"] == "wss://demo-api-adapter.dzengi.com"
    assert demo["rest_url"] == "https://demo-api-adapter.dzengi.com"
    production = clean_feed_settings("dzengi", {})
    assert production["ws_url"] == "wss://api-adapter.dzengi.com" and production["demo"] is False
    # Saved settings carry the URLs: switching `demo` on a saved feed still switches accounts.
    assert clean_feed_settings("dzengi", {**production, "demo": True})["rest_url"] == demo["rest_url"]
    assert clean_feed_settings("dzengi", {**demo, "demo": False})["ws_url"] == production["ws_url"]
    local = clean_feed_settings("dzengi", {"demo": True, "ws_url": "ws://127.0.0.1:9"})
    assert local["ws_url"] == "ws://127.0.0.1:9" and local["rest_url"] == "https://demo-api-adapter.dzengi.com"


def test_api_version_two_changes_the_rest_paths() -> None:
    settings = clean_feed_settings("dzengi", {"api_version": "v2"})
    assert VENUE.instruments_request(settings).url == "https://api-adapter.dzengi.com/api/v2/exchangeInfo"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"demo": "yes"}, "demo"),
        ({"api_version": "v3"}, "api_version"),
        ({"api_version": 2}, "api_version"),
        ({"ws_url": "ftp://x"}, "ws_url"),
        ({"secret": "x"}, "settings"),
    ],
)
def test_bad_settings_are_form_errors_keyed_by_setting(settings: dict[str, object], key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        clean_feed_settings("dzengi", settings)
    assert key in refused.value.message_dict


def test_parseframes_prints_dzengi_trades_exactly_and_reports_the_bad_lines() -> None:
    import io
    import sys

    from django.core.management import call_command

    good = golden.read_frames("dzengi")[1].decode()
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdin", io.StringIO("{oops\n" + good + "\n" + '{"status":"Error","payload":{}}\n'))
        call_command("parseframes", venue="dzengi", stdout=out, stderr=err)
    (record,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (record["symbol"], record["price"], record["quantity"], record["side"]) == (
        "BTC/USD",
        "11400.95",
        "0.058",
        "buy",
    )
    assert (record["trade_id"], record["exchange_time_ms"]) == ("1616651347", 1596625079952)
    assert len(err.getvalue().splitlines()) == 2 and "venue_error" in err.getvalue()
