"""Every venue refuses the same hostile trade under the same named reason.

One trade frame per venue, written in the venue's own format, with one field made
hostile at a time: the parser raises ParseError with the reason the stream counts it by
(feed_frames_malformed_total{venue,reason}), and the untouched frame parses.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb

from feeds.market import MarketData
from feeds.venues import VENUES
from feeds.venues.base import ParseError
from tests.feeds.venues import golden

TS_MS = 1_732_924_800_123
DEEP = b"[" * 1000 + b"]" * 1000
BEYOND_RANGE = "9" * 19 + ".5"  # 19 whole digits: beyond the documented range (core.fixed_point.FIXED_MAX_ABS)


def _binance(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return (
        b'{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1,"s":"%s","a":7,"p":"%s","q":"%s",'
        b'"T":%d,"m":true%s}}' % (symbol, price, size, TS_MS, extra)
    )


def _bitflyer(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"channelMessage","params":{"channel":"lightning_executions_%s",'
        b'"message":[{"id":7,"side":"BUY","price":%s,"size":%s,"exec_date":"2024-11-30T00:00:00.123Z"%s}]}}'
        % (symbol, price, size, extra)
    )


def _kucoin(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return (
        b'{"topic":"/contractMarket/execution:%s","type":"message","subject":"match","data":{"symbol":"%s",'
        b'"side":"buy","size":%s,"price":"%s","tradeId":"7","ts":%d%s}}'
        % (symbol, symbol, size, price, TS_MS * 1_000_000, extra)
    )


def _simulated(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return b'{"e":"trade","s":"%s","t":7,"p":"%s","q":"%s","T":%d,"m":false%s}' % (symbol, price, size, TS_MS, extra)


def _replay(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return b"%d,%s,%s,%s,7%s" % (TS_MS, symbol, price, size, extra)


def _upstox(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    response = pb.FeedResponse(type=pb.live_feed, currentTs=TS_MS)
    placeholder = "\x02" * len(symbol)  # swapped for the raw symbol bytes once serialized
    ltpc = response.feeds[placeholder].ltpc
    ltpc.ltp, ltpc.ltt, ltpc.ltq = float(price), TS_MS, int(float(size)) if abs(float(size)) < 2**63 else 2**63 - 1
    return response.SerializeToString().replace(placeholder.encode(), symbol, 1) + extra


def _dzengi(symbol: bytes, price: bytes, size: bytes, extra: bytes) -> bytes:
    return (
        b'{"status":"OK","destination":"internal.trade","payload":{"price":%s,"size":%s,"id":7,"ts":%d,'
        b'"symbol":"%s","buyer":true%s}}' % (price, size, TS_MS, symbol, extra)
    )


FRAMES: dict[str, Callable[[bytes, bytes, bytes, bytes], bytes]] = {
    "binance-usdm": _binance,
    "bitflyer": _bitflyer,
    "kucoin-futures": _kucoin,
    "simulated": _simulated,
    "replay": _replay,
    "upstox": _upstox,
    "dzengi": _dzengi,
}
# How a frame is nested too deep: a JSON value 1000 brackets deep (a CSV has no nesting,
# so replay sees a column it cannot read; protobuf, unknown groups 1000 deep).
DEEP_EXTRA = {
    "binance-usdm": (b',"x":' + DEEP, "depth"),
    "bitflyer": (b',"x":' + DEEP, "depth"),
    "kucoin-futures": (b',"x":' + DEEP, "depth"),
    "simulated": (b',"x":' + DEEP, "depth"),
    "replay": (b"," + DEEP, "schema"),
    "upstox": (b"\x7b" * 1000 + b"\x7c" * 1000, "protobuf"),
    "dzengi": (b',"x":' + DEEP, "depth"),
}


def _parse(venue: str, frame: bytes) -> list[object]:
    return VENUES[venue].parse(frame, golden.RECEIVED_NS)  # type: ignore[return-value]


def _refusal(venue: str, frame: bytes) -> str:
    with pytest.raises(ParseError) as refused:
        _parse(venue, frame)
    return refused.value.reason


@pytest.mark.parametrize("venue", sorted(FRAMES))
def test_the_untouched_trade_parses(venue: str) -> None:
    (trade,) = _parse(venue, FRAMES[venue](b"BTCUSDT", b"96712.4", b"2", b""))
    assert isinstance(trade, MarketData) and trade.symbol == "BTCUSDT" and trade.price > 0 and trade.volume > 0


HOSTILE_FIELDS = {
    "zero price": (b"BTCUSDT", b"0", b"2", "price"),
    "negative price": (b"BTCUSDT", b"-96712.4", b"2", "price"),
    "negative size": (b"BTCUSDT", b"96712.4", b"-2", "size"),
    "empty symbol": (b"", b"96712.4", b"2", "symbol"),
    "price beyond range": (b"BTCUSDT", BEYOND_RANGE.encode(), b"2", "number"),
    "size beyond range": (b"BTCUSDT", b"96712.4", BEYOND_RANGE.encode(), "number"),
}
CASES = [
    pytest.param(venue, *fields, id=f"{venue}: {name}")
    for venue in sorted(FRAMES)
    for name, fields in HOSTILE_FIELDS.items()
    # Upstox's proto3 sends an unset ltp as 0: no trade yet, not a bad one (below).
    if not (venue == "upstox" and name == "zero price")
]


@pytest.mark.parametrize(("venue", "symbol", "price", "size", "reason"), CASES)
def test_a_hostile_trade_field_is_refused_with_its_reason(
    venue: str,
    symbol: bytes,
    price: bytes,
    size: bytes,
    reason: str,
) -> None:
    assert _refusal(venue, FRAMES[venue](symbol, price, size, b"")) == reason


def test_an_upstox_last_price_of_zero_is_no_trade_yet() -> None:
    assert _parse("upstox", _upstox(b"BTCUSDT", b"0", b"2", b"")) == []


@pytest.mark.parametrize("venue", sorted(FRAMES))
def test_a_frame_nested_1000_deep_is_refused_not_raised(venue: str) -> None:
    extra, reason = DEEP_EXTRA[venue]
    assert _refusal(venue, FRAMES[venue](b"BTCUSDT", b"96712.4", b"2", extra)) == reason


@pytest.mark.parametrize("venue", sorted(FRAMES))
def test_a_symbol_that_is_not_utf8_is_refused(venue: str) -> None:
    reason = _refusal(venue, FRAMES[venue](b"BTC\xff\xfe", b"96712.4", b"2", b""))
    assert reason == ("protobuf" if venue == "upstox" else "utf8")
