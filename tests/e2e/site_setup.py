"""Objects the browser tests need, created in the e2e site's own database (run in a subprocess).

Two users (demo: staff; bob: not), a replay feed whose recorded ticks flip between two
price levels every few seconds, so the volume_breakout strategy on it signals again and
again whichever moment a test looks, and an open broker login prompt for staff.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model

from feeds.models import Feed, Instrument, MarketType, Subscription
from orders.models import Account, TradeSetting
from processor.models import Strategy
from recovery.services import token_await_auth
from recovery.tokens import TokenKey, TokenKind
from tests.orders.trade_fixture import book_fixture_history
from tradingsite.demo import demo_load

REPLAY_SYMBOL = "BRK-USD"
BREAKOUT_STRATEGY = "brk-breakout"
TICK_MS = 250
LEVELS = ("100.00", "101.00")
TICKS_PER_LEVEL = 12  # a breakout every 3 s, each followed by a managed exit
DURATION_S = 20 * 60


def write_replay_csv(path: Path, *, start_ms: int) -> None:
    """One trade per tick; each trade is a whole volume bar (volume = bar_volume)."""
    lines = ["ts_ms,symbol,price,volume"]
    for n in range(DURATION_S * 1000 // TICK_MS):
        level = LEVELS[(n // TICKS_PER_LEVEL) % 2]
        lines.append(f"{start_ms + n * TICK_MS},{REPLAY_SYMBOL},{level},10")
    path.write_text("\n".join(lines) + "\n")


def main(var_dir: str, password: str, start_ms: int) -> None:
    demo_load(password=password)
    csv_path = Path(var_dir) / "breakouts.csv"
    write_replay_csv(csv_path, start_ms=start_ms)
    feed, _ = Feed.objects.get_or_create(
        name="replay",
        defaults={
            "venue": "replay",
            "market_type": MarketType.SIMULATED,
            "settings": {"source": "csv", "path": str(csv_path), "speed": 1},
        },
    )
    instrument, _ = Instrument.objects.get_or_create(
        feed=feed,
        venue_symbol=REPLAY_SYMBOL,
        defaults={"symbol": REPLAY_SYMBOL, "tick_size": Decimal("0.01"), "lot_size": Decimal("1")},
    )
    Subscription.objects.get_or_create(instrument=instrument, channel="trades")
    strategy, _ = Strategy.objects.get_or_create(
        name=BREAKOUT_STRATEGY,
        kind="volume_breakout",
        defaults={"params": {"bar_volume": "10", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}},
    )
    strategy.instruments.add(instrument)
    demo_account = Account.objects.get(owner__username="demo")
    TradeSetting.objects.get_or_create(strategy=strategy, account=demo_account, defaults={"quantity": Decimal("1")})

    bob, _ = get_user_model().objects.get_or_create(username="bob")
    bob.set_password(password)
    bob.save()
    bob_account, _ = Account.objects.get_or_create(
        owner=bob, name="Bob paper", defaults={"allocated_capital": Decimal("10000")}
    )
    TradeSetting.objects.get_or_create(strategy=strategy, account=bob_account, defaults={"quantity": Decimal("2")})

    # carol's closed trades, hand-computed (tests.orders.trade_fixture), booked before the runtime starts.
    book_fixture_history(username="carol", password=password, prefix="carol-")

    # No token yet: the prompt goes to staff (the token slot has no owner).
    token_await_auth(key=TokenKey("upstox", TokenKind.OAUTH), reason="e2e: no token yet")
    print(json.dumps({"demo_account": demo_account.pk, "bob_account": bob_account.pk}))


def record_outcomes(decisions_json: str) -> None:
    """Record outcomes of stored signals on an account, as the trade executor does when it decides.

    `decisions_json`: [{"signal_id", "account_id", "outcome", "reason", "client_order_id"}, ...].
    Prints, as one JSON line, the `signal.outcome` events the site pushes for them: this
    process's channel layer is its own (in-memory), so a test relays them to a browser.
    """
    from orders.outcomes import outcome_event, signal_outcome_record
    from processor.models import StrategySignal
    from processor.signals import Signal, SignalKind

    events = []
    for decision in json.loads(decisions_json):
        row = StrategySignal.objects.get(pk=decision["signal_id"])
        signal = Signal(
            strategy_id=row.strategy_id,
            strategy_name=row.strategy_name,
            feed=row.feed,
            symbol=row.symbol,
            kind=SignalKind(row.kind),
            price=row.price_fixed,
            emitted_ns=int(row.emitted_at.timestamp() * 1e9),
            occurrence_ns=row.occurrence_ns,
            output_id=row.output_id,
        )
        outcome = signal_outcome_record(
            signal=signal,
            account_id=decision["account_id"],
            outcome=decision["outcome"],
            reason=decision.get("reason", ""),
            client_order_id=decision.get("client_order_id", ""),
        )
        events.append({**outcome_event(outcome), "account_name": outcome.account.name if outcome.account else ""})
    print(json.dumps(events))
