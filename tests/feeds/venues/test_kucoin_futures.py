"""kucoin-futures: bullet bootstrap before dialling, client pings, contracts with multipliers."""

from __future__ import annotations

import json

import pytest

from feeds.market import MarketData, parse_fixed
from feeds.venues import kucoin_futures
from feeds.venues.base import ParseError
from feeds.venues.rest import fetch_instruments
from tests.feeds.venues import golden
from tests.feeds.venues.fake_http import FakeVenueHttp

FIXTURES = golden.FIXTURES / "kucoin-futures"


async def test_dialling_posts_for_a_public_token_and_connects_where_the_bullet_says(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("POST", "/api/v1/bullet-public", (FIXTURES / "rest_bullet_public.json").read_bytes())
    venue = kucoin_futures.KucoinFuturesVenue(connect_id=lambda: "conn-1")
    settings = venue.clean_settings({"rest_url": fake_http.base_url})
    (endpoint,) = await venue.endpoints(["XBTUSDTM", "ETHUSDTM"], {"trades", "mark_price"}, settings)
    assert [request.method for request in fake_http.requests] == ["POST"]
    token = json.loads((FIXTURES / "rest_bullet_public.json").read_bytes())["data"]["token"]
    assert endpoint.url == f"wss://ws-api-futures.kucoin.com/?token={token}&connectId=conn-1"
    assert endpoint.keep_alive is not None
    assert endpoint.keep_alive.client_ping_interval_s == 18.0 and endpoint.keep_alive.pong_timeout_s == 10.0
    topics = [json.loads(message)["topic"] for message in endpoint.subscribe]
    assert topics == ["/contract/instrument:XBTUSDTM,ETHUSDTM", "/contractMarket/execution:XBTUSDTM,ETHUSDTM"]
    assert all(json.loads(message)["response"] is True for message in endpoint.subscribe)


async def test_every_dial_fetches_a_fresh_token(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("POST", "/api/v1/bullet-public", (FIXTURES / "rest_bullet_public.json").read_bytes())
    venue = kucoin_futures.KucoinFuturesVenue(connect_id=lambda: "c")
    for _ in range(2):
        await venue.endpoints(["XBTUSDTM"], {"trades"}, {"rest_url": fake_http.base_url})
    assert len(fake_http.requests) == 2


def test_a_refused_bullet_is_a_venue_error() -> None:
    with pytest.raises(ParseError) as info:
        kucoin_futures.parse_bullet(b'{"code":"400100","data":{"token":"","instanceServers":[]}}')
    assert info.value.reason == "venue_error"


def test_subscribe_requests_hold_at_most_100_symbols_each() -> None:
    symbols = [f"S{number}USDTM" for number in range(250)]
    messages = kucoin_futures.subscribe_messages(symbols, {"trades"})
    sizes = [len(json.loads(message)["topic"].partition(":")[2].split(",")) for message in messages]
    assert sizes == [100, 100, 50]


def test_client_ping_is_the_documented_json() -> None:
    assert json.loads(kucoin_futures.VENUE.ping_message(7)) == {"id": "7", "type": "ping"}  # type: ignore[arg-type]


def test_trade_size_stays_in_contracts_as_sent() -> None:
    (trade,) = kucoin_futures.parse(golden.read_frames("kucoin-futures")[3], 0)
    assert isinstance(trade, MarketData)
    assert trade.volume == parse_fixed("135")
    assert trade.ts_event == 1731898619523401216  # ns, as sent


async def test_contracts_give_the_multiplier_that_turns_contracts_into_base_units(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/api/v1/contracts/active", (FIXTURES / "rest_contracts_active.json").read_bytes())
    instruments = await fetch_instruments(kucoin_futures.VENUE, {"rest_url": fake_http.base_url})
    by_symbol = {meta.venue_symbol: meta for meta in instruments}
    assert (by_symbol["XBTUSDTM"].contract_multiplier, by_symbol["XBTUSDTM"].tick_size) == ("0.001", "0.1")
    assert by_symbol["1000PEPEUSDTM"].tick_size == "0.0000001"
    assert by_symbol["ETHUSDTM"].lot_size == "1" and by_symbol["ETHUSDTM"].status == "open"
