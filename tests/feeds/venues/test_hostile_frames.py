"""Hostile frames for every adapter: truncated, mutated and random bytes.

Whatever arrives, `parse` returns events that satisfy the invariants or raises
ParseError; nothing else escapes, and the stream counts every rejected frame.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.health import HealthBoard
from feeds.streams.local_streams import build_local_stream
from feeds.venues import VENUES
from feeds.venues.base import FeedSpec, ParseError
from tests.feeds.doubles import deliver_burst
from tests.feeds.venues import golden
from tests.feeds.venues.invariants import check_event

VENUE_NAMES = sorted(VENUES)
RECORDED = {name: golden.read_frames(name) for name in VENUE_NAMES}
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse_or_reject(venue: str, frame: bytes) -> bool:
    """Return True when the frame parsed; any exception but ParseError fails the test."""
    try:
        events = VENUES[venue].parse(frame, golden.RECEIVED_NS)
    except ParseError as exc:
        assert exc.reason, "a rejection needs a reason to count it by"
        return False
    for event in events:
        check_event(event)
    return True


@st.composite
def recorded_frame(draw: st.DrawFn) -> tuple[str, bytes]:
    venue = draw(st.sampled_from(VENUE_NAMES))
    return venue, draw(st.sampled_from(RECORDED[venue]))


@FAST
@given(recorded_frame(), st.data())
def test_truncated_frames_parse_or_are_rejected(sample: tuple[str, bytes], data: st.DataObject) -> None:
    venue, frame = sample
    cut = data.draw(st.integers(min_value=0, max_value=max(len(frame) - 1, 0)))
    parse_or_reject(venue, frame[:cut])


@FAST
@given(recorded_frame(), st.data())
def test_mutated_frames_parse_or_are_rejected(sample: tuple[str, bytes], data: st.DataObject) -> None:
    venue, frame = sample
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        if not mutated:
            break
        position = data.draw(st.integers(min_value=0, max_value=len(mutated) - 1))
        mutated[position] = data.draw(st.integers(min_value=0, max_value=255))
    parse_or_reject(venue, bytes(mutated))


@FAST
@given(st.sampled_from(VENUE_NAMES), st.binary(max_size=300))
def test_random_bytes_parse_or_are_rejected(venue: str, frame: bytes) -> None:
    parse_or_reject(venue, frame)


JSON_NUMBERS = st.one_of(
    st.just("1e999999999"),
    st.just("-0"),
    st.just("NaN"),
    st.just("1" * 5000),
    st.just("0.000000001"),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
    st.integers().map(str),
)


@FAST
@given(JSON_NUMBERS)
def test_hostile_numbers_in_every_number_field_are_rejected_or_exact(number: str) -> None:
    frames = {
        "binance-usdm": b'{"stream":"x","data":{"e":"aggTrade","E":1,"s":"BTCUSDT","a":1,"p":"%s","q":"1","T":1732924800123,"m":true}}',
        "bitflyer": b'{"jsonrpc":"2.0","method":"channelMessage","params":{"channel":"lightning_executions_BTC_JPY","message":[{"id":1,"side":"BUY","price":%s,"size":0.01,"exec_date":"2026-09-23T10:44:33.5470000Z"}]}}',
        "kucoin-futures": b'{"topic":"/contract/instrument:XBTUSDTM","type":"message","subject":"mark.index.price","data":{"markPrice":%s,"timestamp":1731898620000}}',
        "replay": b"1732924800123,BTC-USDT,%s,1",
        "dzengi": b'{"status":"OK","destination":"internal.trade","payload":{"price":%s,"size":0.058,"id":1,"ts":1596625079952,"symbol":"BTC/USD","buyer":true}}',
    }
    for venue, template in frames.items():
        parse_or_reject(venue, template % number.encode())


@FAST
@given(st.lists(st.tuples(st.sampled_from(VENUE_NAMES), st.binary(max_size=80)), max_size=20))
def test_the_stream_counts_every_rejected_frame_and_keeps_going(frames: list[tuple[str, bytes]]) -> None:
    for venue in VENUE_NAMES:
        batch = [frame for name, frame in frames if name == venue] + RECORDED[venue]
        rejected = sum(not parse_or_reject(venue, frame) for frame in batch)
        # Any venue's frames through the production stream class: only its parse path runs here.
        stream = build_local_stream(
            FeedSpec("f", venue, {}),
            VENUES[venue],
            publish=lambda batch: None,
            health=HealthBoard(),  # type: ignore[arg-type]
            clock_ns=lambda: golden.RECEIVED_NS,
        )
        asyncio.run(deliver_burst(stream, batch))
        assert sum(stream.stats.malformed.values()) == rejected
