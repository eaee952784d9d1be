"""Invariants every parsed event must satisfy, whatever the venue (the replay validator)."""

from __future__ import annotations

import feeds.market as market
from feeds.market import BookTicker, FundingRate, MarketData, MarketEvent, MarkPrice, OrderBook, Ticker

# 2000-01-01 .. 2100-01-01 in ns: a venue time outside is a unit mistake (s vs ms vs ns).
_MIN_TS = 946_684_800 * 10**9
_MAX_TS = 4_102_444_800 * 10**9
# The documented range of a fixed-point value (the numbers module's bound when it
# declares one, else what the recorder's signed 64-bit columns hold), and of a plain
# integer an event carries (sequence numbers).
MAX_FIXED: int = market.FIXED_MAX_ABS
MAX_INT = 2**63 - 1


def _int(value: object, name: str, *, bound: int = MAX_FIXED) -> None:
    assert type(value) is int, f"{name} must be a fixed-point int, got {type(value).__name__}"
    assert -bound <= value <= bound, f"{name} out of range: {value}"  # type: ignore[operator]


def _optional(value: object, name: str, *, minimum: int, bound: int = MAX_FIXED) -> None:
    if value is not None:
        _int(value, name, bound=bound)
        assert value >= minimum, f"{name} below {minimum}: {value}"  # type: ignore[operator]


def check_event(event: MarketEvent) -> None:
    """Raise AssertionError when `event` breaks an invariant."""
    assert isinstance(event, (MarketData, MarkPrice, FundingRate, Ticker, BookTicker, OrderBook)), type(event)
    assert type(event.symbol) is str and event.symbol, "empty symbol"
    _int(event.ts_event, "ts_event", bound=MAX_INT)
    _int(event.ts_recv, "ts_recv", bound=MAX_INT)
    assert _MIN_TS <= event.ts_event <= _MAX_TS, f"exchange time out of range: {event.ts_event}"
    if isinstance(event, MarketData):
        _int(event.price, "price")
        _int(event.volume, "volume")
        assert event.price > 0, "trade price must be positive"
        assert event.volume >= 0, "trade volume must not be negative"
        assert event.trade_id is None or isinstance(event.trade_id, str)
        _optional(event.cumulative_volume, "cumulative_volume", minimum=0)
        _optional(event.duration_since_last_ns, "duration_since_last_ns", minimum=0, bound=MAX_INT)
    elif isinstance(event, MarkPrice):
        _int(event.mark_price, "mark_price")
        assert event.mark_price > 0
        _optional(event.index_price, "index_price", minimum=1)
        _optional(event.funding_rate, "funding_rate", minimum=-MAX_FIXED)
        _optional(event.next_funding_ns, "next_funding_ns", minimum=_MIN_TS, bound=_MAX_TS)
    elif isinstance(event, FundingRate):
        _int(event.funding_rate, "funding_rate")
        _optional(event.next_funding_ns, "next_funding_ns", minimum=_MIN_TS, bound=_MAX_TS)
    elif isinstance(event, Ticker):
        _int(event.last_price, "last_price")
        assert event.last_price > 0
        for name in ("best_bid", "best_ask", "volume_24h"):
            _optional(getattr(event, name), name, minimum=0)
    elif isinstance(event, OrderBook):
        for level in (*event.bids, *event.asks):
            assert type(level) is tuple and len(level) == 2, level
            _int(level[0], "level price")
            assert level[0] > 0, "level price must be positive"
            _int(level[1], "level size")
            assert level[1] >= 0, "level size must not be negative"
        assert event.sequence is None or (type(event.sequence) is int and 0 <= event.sequence <= MAX_INT), (
            event.sequence
        )
    else:
        for value in (event.bid_price, event.ask_price):
            _int(value, "quote price")
            assert value > 0
        for value in (event.bid_size, event.ask_size):
            _int(value, "quote size")
            assert value >= 0
        assert event.sequence is None or (type(event.sequence) is int and 0 <= event.sequence <= MAX_INT), (
            event.sequence
        )


def check_sequence(events: list[MarketEvent]) -> None:
    """Raise AssertionError when a per-symbol sequence (book update id) goes backwards."""
    last: dict[str, int] = {}
    for event in events:
        if isinstance(event, (BookTicker, OrderBook)) and event.sequence is not None:
            previous = last.get(event.symbol)
            assert previous is None or event.sequence >= previous, f"{event.symbol} sequence went backwards"
            last[event.symbol] = event.sequence
