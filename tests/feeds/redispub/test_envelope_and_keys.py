"""The envelope and key layout: exact decimal strings, absent fields absent, lossless round trip."""

from __future__ import annotations

import pytest

from feeds.distribution.redispub.envelope import (
    SCHEMA_VERSION,
    Envelope,
    EnvelopeError,
    Source,
    channel_of,
    decode,
    encode,
    event_data,
)
from feeds.distribution.redispub.keys import KeyLayoutError, parse_key, stream_key, venue_key
from feeds.market import BookTicker, FundingRate, MarkPrice, Side, Ticker, parse_fixed
from tests.feeds.factories import trade


def envelope(**overrides: object) -> Envelope:
    fields: dict[str, object] = dict(
        venue="binance-usdm",
        market_type="perpetual",
        symbol="BTC-USDT",
        venue_symbol="BTCUSDT",
        channel="trades",
        publish_seq=41,
        instance_id="3f2a9c0d11be",
        recv_time_ns=1_764_460_800_125_000_000,
        publish_time_ns=1_764_460_800_125_301_000,
        exchange_time_ns=1_764_460_800_123_000_000,
        source=Source.WS.value,
        status="HEALTHY",
        data={"price": "96712.4", "quantity": "0.015"},
    )
    fields.update(overrides)
    return Envelope(**fields)  # type: ignore[arg-type]


def test_envelope_round_trips_every_field() -> None:
    original = envelope(status="DEGRADED", status_reason="websocket value expired", source=Source.REST.value)
    assert decode(encode(original)) == original


def test_envelope_json_carries_numbers_as_strings_and_times_as_integers() -> None:
    body = encode(envelope())
    assert b'"price":"96712.4"' in body
    assert b'"recv_time_ns":1764460800125000000' in body
    assert f'"schema_version":{SCHEMA_VERSION}'.encode() in body


def test_decode_refuses_another_schema_version_and_garbage() -> None:
    with pytest.raises(EnvelopeError, match="schema_version"):
        decode(encode(envelope(schema_version=SCHEMA_VERSION + 1)))
    with pytest.raises(EnvelopeError):
        decode(b'{"venue":"x"}')
    with pytest.raises(EnvelopeError):
        decode(b"not json")


def test_trade_data_is_exact_with_a_price_a_float_cannot_hold() -> None:
    event = trade(7, price=parse_fixed("68432.15"), volume=parse_fixed("0.00000001"), side=Side.SELL)
    assert channel_of(event) == "trades"
    assert event_data(event) == {"price": "68432.15", "quantity": "0.00000001", "side": "sell", "trade_id": "7"}


def test_absent_venue_fields_are_left_out_never_zero() -> None:
    mark = MarkPrice(symbol="BTCUSDT", mark_price=parse_fixed("96700.5"), ts_event=1, ts_recv=2)
    assert event_data(mark) == {"mark_price": "96700.5"}
    funding = FundingRate(symbol="XBTUSDTM", funding_rate=0, ts_event=1, ts_recv=2, next_funding_ns=9)
    # A zero funding rate the venue sent is a real value and is kept.
    assert event_data(funding) == {"funding_rate": "0", "next_funding_time_ns": 9}
    assert channel_of(funding) == "funding"
    ticker = Ticker(symbol="BTCUSDT", last_price=parse_fixed("1.5"), ts_event=1, ts_recv=2, best_ask=parse_fixed("1.6"))
    assert event_data(ticker) == {"last_price": "1.5", "best_ask": "1.6"}


def test_book_ticker_data_has_both_sides_and_the_venue_sequence() -> None:
    book = BookTicker(
        symbol="BTCUSDT",
        bid_price=parse_fixed("10.1"),
        bid_size=parse_fixed("2"),
        ask_price=parse_fixed("10.2"),
        ask_size=0,
        ts_event=1,
        ts_recv=2,
        sequence=77,
    )
    assert channel_of(book) == "book_ticker"
    assert event_data(book) == {
        "bid_price": "10.1",
        "bid_size": "2",
        "ask_price": "10.2",
        "ask_size": "0",
        "sequence": 77,
    }


def test_key_layout_and_parse() -> None:
    key = stream_key("md", "binance-usdm", "perpetual", "BTC-USDT", "trades")
    assert key == "md:binance-usdm:perpetual:BTC-USDT:trades"
    parsed = parse_key(key)
    assert parsed is not None and (parsed.venue, parsed.symbol, parsed.channel) == (
        "binance-usdm",
        "BTC-USDT",
        "trades",
    )
    venue = venue_key("md", "binance-usdm", "health")
    assert venue == "md:binance-usdm:venue:health"
    parsed_venue = parse_key(venue)
    assert parsed_venue is not None and parsed_venue.symbol is None and parsed_venue.channel == "health"
    assert parse_key("md:something:else") is None


@pytest.mark.parametrize("bad", ["", "BTC:USDT", "BTC USDT"])
def test_key_parts_that_would_break_the_layout_are_refused(bad: str) -> None:
    with pytest.raises(KeyLayoutError):
        stream_key("md", "binance-usdm", "perpetual", bad, "trades")


def test_venue_scope_is_not_a_market_type() -> None:
    with pytest.raises(KeyLayoutError):
        stream_key("md", "binance-usdm", "venue", "BTC-USDT", "trades")
