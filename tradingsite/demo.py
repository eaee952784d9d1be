"""The demo setup: a simulated feed, five instruments, two strategies on a paper account."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction

from feeds.models import Feed, Instrument, MarketType, Subscription
from orders.brokers.kinds import PAPER
from orders.models import Account, TradeMode, TradeSetting
from processor.models import Strategy

DEMO_USERNAME = "demo"
DEMO_FEED = "sim"
# symbol, tick size, lot size, start price
DEMO_INSTRUMENTS = [
    ("BTC-USD", "0.1", "0.001", "64000"),
    ("ETH-USD", "0.01", "0.01", "3400"),
    ("SOL-USD", "0.001", "0.1", "150"),
    ("XRP-USD", "0.0001", "1", "0.6"),
    ("DOGE-USD", "0.00001", "10", "0.15"),
]


@dataclass(frozen=True)
class DemoResult:
    username: str
    password: str | None  # set only when created or reset now; never stored in clear
    created_user: bool


@transaction.atomic
def demo_load(*, password: str | None = None) -> DemoResult:
    """Create or refresh the demo objects; running it twice changes nothing the second time."""
    feed, _ = Feed.objects.get_or_create(
        name=DEMO_FEED,
        defaults={
            "venue": "simulated",
            "market_type": MarketType.SIMULATED,
            "settings": {
                "seed": 7,
                "interval_ms": 250,
                "volatility_bps": 4.0,
                "start_prices": {symbol: start for symbol, _, _, start in DEMO_INSTRUMENTS},
            },
        },
    )
    instruments = {}
    for symbol, tick, lot, _ in DEMO_INSTRUMENTS:
        instrument, _ = Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=symbol,
            defaults={"symbol": symbol, "tick_size": Decimal(tick), "lot_size": Decimal(lot)},
        )
        Subscription.objects.get_or_create(instrument=instrument, channel="trades")
        instruments[symbol] = instrument

    ema, _ = Strategy.objects.get_or_create(
        name="ema-cross",
        # One-minute buckets decided at bucket close: the live price wobbling inside a
        # bucket no longer flips the position (and pays two fees) several times a minute.
        defaults={
            "kind": "ema",
            "params": {"timeframe_s": 60, "fast": 5, "slow": 20, "long_only": False, "bucket_close_only": True},
        },
    )
    ema.instruments.add(instruments["BTC-USD"], instruments["ETH-USD"])
    breakout, _ = Strategy.objects.get_or_create(
        name="sol-volume-breakout",
        defaults={
            "kind": "volume_breakout",
            "params": {"bar_volume": "50", "lookback": 5, "hold_bars": 3, "cooldown_bars": 2},
        },
    )
    breakout.instruments.add(instruments["SOL-USD"])

    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    if created and password is None:
        password = secrets.token_urlsafe(12)
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])

    account, _ = Account.objects.get_or_create(
        owner=user,
        name="Paper",
        defaults={
            "broker": PAPER,
            "allocated_capital": Decimal("100000"),
            "max_open_positions": 5,
            "daily_loss_limit": Decimal("1000"),
        },
    )
    # Exit levels in percent of the entry price, watched on every tick (orders.risk_watch).
    for strategy, quantity, stop_loss, take_profit in ((ema, "0.01", "1", "2"), (breakout, "1", "2", None)):
        TradeSetting.objects.get_or_create(
            strategy=strategy,
            account=account,
            defaults={
                "quantity": Decimal(quantity),
                "mode": TradeMode.PAPER,
                "stop_loss_pct": Decimal(stop_loss),
                "take_profit_pct": Decimal(take_profit) if take_profit else None,
            },
        )
    return DemoResult(username=user.get_username(), password=password, created_user=created)
