"""tabdeal: the socket's endpoints and subscribe requests, its settings, and the REST helpers
run by the production client against the local fake venue."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from feeds.market import OrderBook, parse_fixed
from feeds.venues import tabdeal
from feeds.venues.base import ParseError
from feeds.venues.rest import fetch, fetch_instruments
from tests.fakes.tabdeal import FakeTabdeal
from tests.feeds.venues import golden

FIXTURES = golden.FIXTURES / "tabdeal"
VENUE = tabdeal.VENUE


def fx(text: str) -> int:
    return parse_fixed(text)


async def test_one_connection_per_50_contracts_each_subscribed_in_one_request() -> None:
    symbols = [f"C{number}_USDT" for number in range(120)]
    settings = VENUE.clean_settings({"ws_url": "wss://example.test", "interval_ms": 200})
    endpoints = await VENUE.endpoints(symbols, ["order_book"], settings)
    assert [len(endpoint.streams) for endpoint in endpoints] == [50, 50, 20]
    assert {endpoint.url for endpoint in endpoints} == {"wss://example.test/special_margin/stream/"}
    first = json.loads(endpoints[0].subscribe[0])
    assert first == {
        "method": "SUBSCRIBE",
        "params": [f"special_margin@C{number}_USDT@depth@200ms" for number in range(50)],
        "id": 1,
    }
    assert [json.loads(endpoint.subscribe[0])["id"] for endpoint in endpoints] == [1, 2, 3]


async def test_the_venue_serves_order_books_only() -> None:
    assert VENUE.channels == {"order_book"}
    with pytest.raises(ValueError, match="no channel"):
        await VENUE.endpoints(["BTC_USDT"], ["trades"], VENUE.clean_settings({}))
    assert VENUE.latest_request("mark_price", "BTC_USDT", VENUE.clean_settings({})) is None


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"interval_ms": 300}, "interval_ms"),
        ({"interval_ms": "1000"}, "interval_ms"),
        ({"depth_limit": 0}, "depth_limit"),
        ({"depth_limit": 101}, "depth_limit"),
        ({"depth_limit": True}, "depth_limit"),
        ({"ws_url": "ftp://x"}, "ws_url"),
        ({"mark_price_1s": True}, "settings"),
    ],
)
def test_settings_the_venue_cannot_serve_are_refused_per_field(settings: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        VENUE.clean_settings(settings)
    assert field in info.value.message_dict


def test_defaults_are_the_documented_endpoints_and_a_one_second_book() -> None:
    cleaned = VENUE.clean_settings({})
    assert cleaned == {
        "ws_url": "wss://api1.tabdeal.org",
        "rest_url": "https://api1.tabdeal.org",
        "interval_ms": 1000,
        "depth_limit": 20,
    }
    # The venue closes a connection about hourly; the runtime redials before that.
    assert VENUE.keep_alive.max_connection_age_s == 3600.0


def test_a_snapshot_keeps_every_level_exactly_and_best_first() -> None:
    frame = golden.read_frames("tabdeal")[1]
    (book,) = VENUE.parse(frame, 5)
    assert book == OrderBook(
        "BTC_USDT",
        ((fx("39792.23"), fx("8.27169")), (fx("39792.18"), fx("0.33006"))),
        ((fx("39792.24"), fx("1.27040")), (fx("39792.27"), fx("0.00850"))),
        1_657_530_675_579_000_000,
        5,
    )


def test_data_sent_as_json_text_reads_the_same_as_an_object() -> None:
    as_object = {"e": "depthUpdate", "E": 1732924800123, "s": "ETHUSDT", "b": [["1.5", "2"]], "a": []}
    stream = "special_margin-ETH_USDT-depth-1000ms"
    text_frame = json.dumps({"stream": stream, "data": json.dumps(as_object)}).encode()
    object_frame = json.dumps({"stream": stream, "data": as_object}).encode()
    assert VENUE.parse(text_frame, 1) == VENUE.parse(object_frame, 1)


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b'{"stream":"special_margin-BTC_USDT-trade","data":{"b":[],"a":[]}}', "schema"),
        (
            b'{"stream":"special_margin-BTC_USDT-depth-1000ms","data":"{\\"b\\":[[\\"0\\",\\"1\\"]],\\"a\\":[]}"}',
            "price",
        ),
        (b'{"stream":"special_margin-BTC_USDT-depth-1000ms","data":"not json"}', "json"),
        (b'{"stream":"special_margin-BTC_USDT-depth-1000ms","data":{"b":[],"a":[],"s":""}}', "symbol"),
        (b'{"stream":"special_margin-BTC_USDT-depth-1000ms","data":{"b":[],"a":[],"u":-1}}', "number"),
        (b'{"stream":"special_margin-BTC_USDT-depth-1000ms"}', "schema"),
        (b'{"id":1,"code":1211,"msg":"Invalid params"}', "venue_error"),
        (b"{}", "schema"),
        (b"connection closed", "json"),
    ],
)
def test_hostile_frames_are_refused_under_their_reason(frame: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        VENUE.parse(frame, 1)
    assert info.value.reason == reason


def test_the_hourly_close_notice_and_acks_carry_no_events() -> None:
    assert VENUE.parse(b"connection closed ok", 1) == []
    assert VENUE.parse(b'{"result":null,"id":7}', 1) == []


def test_rest_snapshot_carries_the_update_id_and_send_time() -> None:
    (book,) = VENUE.parse_latest("order_book", (FIXTURES / "rest_depth.json").read_bytes(), "BTC_USDT", 9)
    assert isinstance(book, OrderBook)
    assert book.bids == ((fx("96712.4"), fx("0.015")), (fx("96712.3"), fx("1.2")), (fx("96700"), fx("3")))
    assert book.asks == ((fx("96712.5"), fx("0.8")), (fx("96713"), fx("2.45")))
    assert (book.sequence, book.ts_event, book.ts_recv) == (1027024, 1_732_924_800_450_000_000, 9)


def test_rest_errors_are_venue_errors_and_a_book_without_sides_is_refused() -> None:
    for body, reason in (
        (b'{"code":1208,"msg":"Invalid symbol"}', "venue_error"),
        (b'{"lastUpdateId":1}', "schema"),
        (b'{"bids":[["1","-1"]],"asks":[]}', "size"),
    ):
        with pytest.raises(ParseError) as info:
            tabdeal.parse_depth_snapshot(body, "BTC_USDT", 1)
        assert info.value.reason == reason


def test_exchange_info_gives_tick_lot_and_the_market_data_spelling() -> None:
    instruments = VENUE.parse_instruments((FIXTURES / "rest_exchangeInfo.json").read_bytes())
    assert [(i.venue_symbol, i.tick_size, i.lot_size, i.min_quantity, i.status) for i in instruments] == [
        ("BTC_USDT", "0.1", "0.001", "0.001", "trading"),
        ("ETH_USDT", "0.01", "0.01", "0.01", "break"),
    ]
    as_list = json.dumps(json.loads((FIXTURES / "rest_exchangeInfo.json").read_bytes())["symbols"]).encode()
    assert VENUE.parse_instruments(as_list) == instruments
    with pytest.raises(ParseError) as info:
        VENUE.parse_instruments(b'{"code":1300,"msg":"server error"}')
    assert info.value.reason == "venue_error"


async def test_the_production_rest_client_reads_the_fake_venue() -> None:
    async with FakeTabdeal() as fake:
        fake.set_book("BTC_USDT", [("96712.40", "0.015"), ("96712.3", "1")], [("96712.5", "0.8")])
        settings = VENUE.clean_settings({"rest_url": fake.rest_url, "depth_limit": 1})
        instruments = await fetch_instruments(VENUE, settings)
        assert [(i.venue_symbol, i.tick_size) for i in instruments] == [("BTC_USDT", "0.1")]
        request = VENUE.latest_request("order_book", "BTC_USDT", settings)
        assert request is not None and dict(request.params) == {"symbol": "BTC_USDT", "limit": "1"}
        (book,) = VENUE.parse_latest("order_book", await fetch(request), "BTC_USDT", 1)
        assert isinstance(book, OrderBook)
        assert (book.bids, book.asks, book.sequence) == (
            ((fx("96712.4"), fx("0.015")),),
            ((fx("96712.5"), fx("0.8")),),
            1,
        )


@pytest.mark.django_db
def test_feed_add_subscribes_tabdeal_instruments_to_their_order_books_and_the_admin_validates_them() -> None:
    from io import StringIO

    from django.core.management import call_command

    from feeds.models import Feed, Subscription

    out = StringIO()
    call_command(
        "feed",
        "add",
        "tab",
        "--venue",
        "tabdeal",
        "--symbols",
        "BTC_USDT,ETH_USDT",
        "--ws-url",
        "ws://127.0.0.1:9",
        stdout=out,
    )
    assert "feed tab: added (tabdeal, enabled)" in out.getvalue()
    feed = Feed.objects.get(name="tab")
    assert feed.market_type == "perpetual" and feed.settings["ws_url"] == "ws://127.0.0.1:9"
    subscriptions = Subscription.objects.filter(instrument__feed=feed)
    assert sorted(subscriptions.values_list("instrument__venue_symbol", "channel")) == [
        ("BTC_USDT", "order_book"),
        ("ETH_USDT", "order_book"),
    ]
    # What the admin's forms run: the channel must be one the venue serves, the settings its own.
    instrument = subscriptions.first().instrument  # type: ignore[union-attr]
    with pytest.raises(ValidationError) as caught:
        Subscription(instrument=instrument, channel="trades").full_clean()
    assert "serves order_book" in caught.value.message_dict["channel"][0]
    feed.settings = {"interval_ms": 250}
    with pytest.raises(ValidationError) as settings_error:
        feed.full_clean()
    assert "interval_ms" in str(settings_error.value)
