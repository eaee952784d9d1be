"""Invariants every parsed event must satisfy, whatever the venue (the replay validator)."""
from __future__ import annotations

from feeds.market import BookTicker, FundingRate, MarketData, MarketEvent, MarkPrice, Ticker

# 2000-01-01 .. 2100-01-01 in ns: a venue time outside is a unit mistake (s vs ms vs ns).
_MIN_TS = 946_684_800 * 10**9
_MAX_TS = 4_102_444_800 * 10**9


def _int(value: object, name: str) -> None:
    assert type(value) is int, f"{name} must be a fixed-point int, got {type(value).__name__}"


def check_event(event: MarketEvent) -> None:
    """Raise AssertionError when `event` breaks an invariant."""
    assert isinstance(event, (MarketData, MarkPrice, FundingRate, Ticker, BookTicker)), type(event)
    assert event.symbol, "empty symbol"
    _int(event.ts_event, "ts_event")
    _int(event.ts_recv, "ts_recv")
    assert _MIN_TS <= event.ts_event <= _MAX_TS, f"exchange time out of range: {event.ts_event}"
    if isinstance(event, MarketData):
        _int(event.price, "price")
        _int(event.volume, "volume")
        assert event.price > 0, "trade price must be positive"
        assert event.volume >= 0, "trade volume must not be negative"
        assert event.trade_id is None or isinstance(event.trade_id, str)
    elif isinstance(event, MarkPrice):
        _int(event.mark_price, "mark_price")
        assert event.mark_price > 0
        assert event.index_price is None or (type(event.index_price) is int and event.index_price > 0)
        assert event.funding_rate is None or type(event.funding_rate) is int
    elif isinstance(event, FundingRate):
        _int(event.funding_rate, "funding_rate")
    elif isinstance(event, Ticker):
        _int(event.last_price, "last_price")
        assert event.last_price > 0
        for value in (event.best_bid, event.best_ask, event.volume_24h):
            assert value is None or (type(value) is int and value >= 0)
    else:
        for value in (event.bid_price, event.ask_price):
            _int(value, "quote price")
            assert value > 0
        for value in (event.bid_size, event.ask_size):
            _int(value, "quote size")
            assert value >= 0


def check_sequence(events: list[MarketEvent]) -> None:
    """Raise AssertionError when a per-symbol sequence (book update id) goes backwards."""
    last: dict[str, int] = {}
    for event in events:
        if isinstance(event, BookTicker) and event.sequence is not None:
            previous = last.get(event.symbol)
            assert previous is None or event.sequence >= previous, f"{event.symbol} sequence went backwards"
            last[event.symbol] = event.sequence
