"""Recorded ticks and backtest runs for the backtesting tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from backtesting.models import BacktestRun
from backtesting.services import RunRequest
from feeds.market import parse_fixed
from feeds.models import Instrument, Tick
from tests.orders.factories import make_instrument

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
START_NS = int(START.timestamp()) * 1_000_000_000
TICK_NS = 250_000_000
BREAKOUT = {"bar_volume": "10", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}


def record_flipping_ticks(instrument: Instrument | None = None, *, count: int = 240) -> Instrument:
    """Ticks that flip between two price levels every 12 ticks: volume_breakout trades again and again."""
    instrument = instrument or make_instrument()
    Tick.objects.bulk_create(
        Tick(
            instrument=instrument,
            ts_event=START_NS + n * TICK_NS,
            ts_recv=START_NS + n * TICK_NS,
            price=parse_fixed(("100.0", "101.0")[(n // 12) % 2]),
            volume=parse_fixed("10"),
            trade_id=str(n + 1),
        )
        for n in range(count)
    )
    return instrument


def run_request(instrument: Instrument, **changes: Any) -> RunRequest:
    values: dict[str, Any] = {
        "kind": "volume_breakout",
        "params": BREAKOUT,
        "feed": instrument.feed.name,
        "symbols": [instrument.symbol],
        "start_ns": START_NS,
        "end_ns": START_NS + 120 * 1_000_000_000,
        "capital": Decimal("10000"),
        "quantity": Decimal("1"),
        "lot_size": instrument.lot_size,
        "tick_size": instrument.tick_size,
        "order_type": "MARKET",
        "reversal": "after_exit_fill",
        "taker_bps": 5,
        "maker_bps": 2,
        "latency_ms": 0,
    }
    return RunRequest(**(values | changes))


def queued_run(owner: Any, instrument: Instrument, **changes: Any) -> BacktestRun:
    """A queued run stored without being started (the test starts it)."""
    request = run_request(instrument, **changes)
    return BacktestRun.objects.create(owner=owner, **vars(request))


def record_walk_ticks(instrument: Instrument | None = None, *, count: int = 1_500) -> Instrument:
    """A seeded random walk (about 25 minutes from START): EMA crossings that differ with the periods."""
    import random

    instrument = instrument or make_instrument()
    rng = random.Random(7)
    price, ts = 100.0, START_NS
    rows = []
    for n in range(count):
        price *= 1 + rng.gauss(0, 0.002)
        ts += rng.randint(100, 2_000) * 1_000_000
        rows.append(
            Tick(
                instrument=instrument,
                ts_event=ts,
                ts_recv=ts,
                price=parse_fixed(f"{price:.2f}"),
                volume=parse_fixed(str(rng.randint(1, 40) / 10)),
                trade_id=str(n + 1),
            )
        )
    Tick.objects.bulk_create(rows)
    return instrument
