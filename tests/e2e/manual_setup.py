"""Traders for the manual-control browser tests, made and inspected in the e2e site's own database (run in a subprocess).

Each trader has one paper account on the demo's simulated BTC-USD and ETH-USD through a
strategy that is switched off (it never signals, so every position is the test's own),
with the risk limits the test asks for.
"""

from __future__ import annotations

import json
from decimal import Decimal

from django.contrib.auth import get_user_model

from feeds.models import Instrument
from orders.ledger import ledger_check, ledger_open
from orders.models import Account, Position, TradeSetting
from processor.models import Strategy


def make_trader(username: str, password: str, limits_json: str) -> None:
    """Create `username` with an account; `limits_json`: {"stop_loss_pct", "daily_loss_limit", ...} (optional)."""
    limits = json.loads(limits_json)
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.set_password(password)
    user.save()
    account, _ = Account.objects.get_or_create(
        owner=user,
        name=f"{username} paper",
        defaults={
            "allocated_capital": Decimal("1000000"),
            "daily_loss_limit": limits.get("daily_loss_limit"),
            "max_open_positions": limits.get("max_open_positions"),
        },
    )
    ledger_open(account=account)
    strategy, _ = Strategy.objects.get_or_create(
        name=f"{username}-hand",
        kind="ema",
        defaults={"params": {"timeframe_s": 3600, "fast": 2, "slow": 3}, "enabled": False},
    )
    strategy.instruments.add(*Instrument.objects.filter(feed__name="sim", symbol__in=["BTC-USD", "ETH-USD"]))
    TradeSetting.objects.get_or_create(
        strategy=strategy,
        account=account,
        defaults={"quantity": Decimal("0.01"), "stop_loss_pct": limits.get("stop_loss_pct")},
    )
    print(json.dumps({"account": account.pk}))


def books(username: str) -> None:
    """Print the trader's positions, the paper broker's net position per symbol and the ledger check."""
    from orders.brokers.paper import PaperExchange
    from orders.models import AuditEvent, SignalOutcome

    account = Account.objects.get(owner__username=username)
    positions = [
        {"id": p.pk, "state": p.state, "quantity": p.quantity, "symbol": p.instrument.symbol}
        for p in Position.objects.filter(account=account).select_related("instrument")
    ]
    broker = PaperExchange(account_key=str(account.pk)).positions()
    outcomes = list(SignalOutcome.objects.filter(account=account).values_list("output_id", "outcome", "reason"))
    events = list(AuditEvent.objects.filter(account=account, event__startswith="risk.").values_list("event", flat=True))
    print(
        json.dumps(
            {
                "positions": positions,
                "broker": [[b.symbol, b.quantity] for b in broker],
                "ledger_ok": ledger_check(account_id=account.pk).ok,
                "outcomes": outcomes,
                "risk_events": events,
            }
        )
    )
