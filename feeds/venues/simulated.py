"""The `simulated` venue: a seeded, deterministic random walk of trades.

It stands in for an exchange on a laptop and in demos. Frames look like a typical
exchange trade stream and go through the same parse path as a real venue:

    {"e":"trade","s":"BTC-USD","t":42,"p":"64012.5","q":"0.013","T":1732924800123,"m":false}

The tape is a function of the seed: trade n of a symbol takes its price step, quantity
and side from a hash of (seed, symbol, n), and its price from trade n-1's. So a market
resumed after a recorded trade (`open_after`, handed the persisted checkpoints) goes on
with the next id and the very trades the uninterrupted tape would have had: a restarted
process or a standby taking the feed over neither repeats an id nor skips one, and the
trades a killed process had not yet written are made again (stamped with the time they
are made again).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec
import orjson
from django.core.exceptions import ValidationError

from feeds.market import MarketData, Side, parse_fixed
from feeds.venues.base import DEFAULT_LIMITS, FeedSpec, InstrumentSpec, RecordedTicks, StatelessStream
from feeds.venues.construct import make_trade
from feeds.venues.errors import DECODE_FAILURES, MAX_FIXED, as_parse_error, trade_refusal
from feeds.venues.numbers import fixed, ms_to_ns

NAME = "simulated"
CHANNELS = frozenset({"trades"})
DEFAULTS: dict[str, object] = {
    "seed": 1,
    "interval_ms": 250,
    "volatility_bps": 5.0,
    "start_prices": {},
}
_FALLBACK_START_PRICE = Decimal(100)


class TradeFrame(msgspec.Struct, frozen=True):
    e: str  # event type, "trade"
    s: str  # symbol
    t: int  # trade id, per symbol
    p: str  # price
    q: str  # quantity
    T: int  # trade time, ms
    m: bool  # buyer is maker: the seller was the aggressor


class _EventType(msgspec.Struct):
    e: str


_decode_type = msgspec.json.Decoder(_EventType).decode
_decode_trade = msgspec.json.Decoder(TradeFrame).decode


_TWO_32 = float(2**32)


def _draws(seed: int, symbol: str, trade_id: int) -> tuple[float, int, bool]:
    """Trade `trade_id`'s standard normal price step, lot count (1..100) and side, from its hash."""
    digest = hashlib.blake2b(f"{seed}:{symbol}:{trade_id}".encode(), digest_size=16).digest()
    a, b, c, d = (int.from_bytes(digest[i : i + 4], "big") for i in range(0, 16, 4))
    u1, u2 = (a + 1) / (_TWO_32 + 1), b / _TWO_32  # u1 in (0, 1): log(u1) is finite
    gauss = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
    return gauss, 1 + c % 100, d < 2**31


def _resume_point(last: MarketData | None, tick: Decimal) -> tuple[int, int] | None:
    """(price in ticks, trade id) of a recorded trade to go on after; None if it has no numeric id."""
    if last is None or not (last.trade_id or "").isdigit():
        return None
    return max(last.price // parse_fixed(format(tick, "f")), 1), int(last.trade_id)  # type: ignore[arg-type]


class SimulatedMarket:
    """The exchange side: the same seed and instruments give the same trades, always.

    `after` maps venue symbols to the last trade already delivered (the persisted
    checkpoint): that symbol's tape goes on from the next trade id.
    """

    def __init__(
        self,
        *,
        seed: int,
        volatility_bps: float,
        instruments: Sequence[InstrumentSpec],
        start_prices: Mapping[str, str],
        after: Mapping[str, MarketData] | None = None,
    ) -> None:
        self._seed = seed
        self._volatility = volatility_bps / 10_000
        self._books: list[list[Any]] = []
        for spec in instruments:
            tick, lot = Decimal(spec.tick_size), Decimal(spec.lot_size)
            start = Decimal(str(start_prices.get(spec.venue_symbol, _FALLBACK_START_PRICE)))
            price_ticks, trade_id = _resume_point((after or {}).get(spec.venue_symbol), tick) or (
                max(int(start / tick), 1),
                0,
            )
            self._books.append([spec.venue_symbol, tick, lot, price_ticks, trade_id])

    def next_round(self, ts_ms: int) -> list[bytes]:
        """Return one trade frame per instrument, stamped `ts_ms`."""
        frames = []
        seed = self._seed
        for book in self._books:
            symbol, tick, lot, price_ticks, trade_id = book
            trade_id += 1
            gauss, lots, seller_aggressor = _draws(seed, symbol, trade_id)
            price_ticks = max(price_ticks + round(gauss * price_ticks * self._volatility), 1)
            book[3], book[4] = price_ticks, trade_id
            frames.append(
                orjson.dumps(
                    {
                        "e": "trade",
                        "s": symbol,
                        "t": trade_id,
                        "p": format(tick * price_ticks, "f"),
                        "q": format(lot * lots, "f"),
                        "T": ts_ms,
                        "m": seller_aggressor,
                    }
                )
            )
        return frames


class SimulatedSource:
    """Emits one round of trades every `interval_ms`; the clock and sleep are injectable."""

    def __init__(
        self,
        market: SimulatedMarket,
        interval_ms: int,
        *,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        sleep: Callable[[float], object] = asyncio.sleep,
    ) -> None:
        self._market = market
        self._interval_s = interval_ms / 1000
        self._clock_ms = clock_ms
        self._sleep = sleep

    async def batches(self) -> AsyncIterator[list[bytes]]:
        while True:
            yield self._market.next_round(self._clock_ms())
            await self._sleep(self._interval_s)  # type: ignore[misc]


class SimulatedVenue:
    name = NAME
    channels = CHANNELS
    limits = DEFAULT_LIMITS  # nothing is dialled or fetched
    default_market_type = "simulated"

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        cleaned = {**DEFAULTS, **settings}
        errors: dict[str, str] = {}
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            errors["settings"] = f"unknown keys {sorted(unknown)}; allowed: {sorted(DEFAULTS)}"
        if not isinstance(cleaned["seed"], int) or isinstance(cleaned["seed"], bool):
            errors["seed"] = "seed must be an integer"
        interval = cleaned["interval_ms"]
        if not isinstance(interval, int) or isinstance(interval, bool) or not 10 <= interval <= 60_000:
            errors["interval_ms"] = "interval_ms must be an integer from 10 to 60000"
        vol = cleaned["volatility_bps"]
        if not isinstance(vol, (int, float)) or isinstance(vol, bool) or not 0 < vol <= 1000:
            errors["volatility_bps"] = "volatility_bps must be a number above 0 and at most 1000"
        prices = cleaned["start_prices"]
        if not isinstance(prices, dict):
            errors["start_prices"] = "start_prices must map venue symbols to decimal strings"
        else:
            for symbol, price in prices.items():
                try:
                    if Decimal(str(price)) <= 0:
                        raise InvalidOperation
                except InvalidOperation:
                    errors["start_prices"] = f"start price of {symbol} must be a positive decimal"
        if errors:
            raise ValidationError({key: [message] for key, message in errors.items()})
        return cleaned

    def open(self, feed: FeedSpec, *, recorded_ticks: RecordedTicks | None = None) -> SimulatedSource:
        """Return the feed's frame source from the start of its tape (a simulation reads no recording)."""
        return self.open_after(feed, {})

    def open_after(self, feed: FeedSpec, last: Mapping[str, MarketData]) -> SimulatedSource:
        """Return the feed's frame source going on after `last` (venue symbol -> its last trade)."""
        settings = self.clean_settings(feed.settings)
        market = SimulatedMarket(
            seed=settings["seed"],  # type: ignore[arg-type]
            volatility_bps=settings["volatility_bps"],  # type: ignore[arg-type]
            instruments=feed.instruments,
            start_prices=settings["start_prices"],  # type: ignore[arg-type]
            after=last,
        )
        return SimulatedSource(market, settings["interval_ms"])  # type: ignore[arg-type]

    def new_stream_state(self) -> StatelessStream:
        return StatelessStream()

    def parse(self, frame: bytes, received_ns: int) -> list[MarketData]:
        try:
            if _decode_type(frame).e != "trade":
                return []
            trade = _decode_trade(frame)
            price, volume, symbol = fixed(trade.p), fixed(trade.q), trade.s
            if not (0 < price <= MAX_FIXED and 0 < volume <= MAX_FIXED and symbol):
                raise trade_refusal(price, volume, symbol)  # type: ignore[misc]
            # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side), positional.
            return [
                make_trade(
                    symbol,
                    price,
                    volume,
                    ms_to_ns(trade.T),
                    received_ns,
                    str(trade.t),
                    Side.SELL if trade.m else Side.BUY,
                )
            ]
        except DECODE_FAILURES as exc:
            raise as_parse_error(exc) from None


VENUE = SimulatedVenue()
