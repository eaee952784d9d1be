"""The hand-computed history of the trade and performance tests (unit, API and browser).

Capital 10,000; instruments BTCUSDT and ETHUSDT (multiplier 1); all times UTC.

| # | strategy | symbol  | side  | qty | entry | exit | fees      | gross | net   | exit day   |
|---|----------|---------|-------|-----|-------|------|-----------|-------|-------|------------|
| 1 | alpha    | BTCUSDT | LONG  | 1   | 100   | 110  | 0.5 + 0.5 | 10    | 9     | 2026-11-02 |
| 2 | alpha    | BTCUSDT | LONG  | 2   | 110   | 105  | 1 + 1     | -10   | -12   | 2026-11-03 |
| 3 | alpha    | ETHUSDT | SHORT | 1   | 50    | 45   | 0.25+0.25 | 5     | 4.5   | 2026-11-03 |
| 4 | alpha    | ETHUSDT | LONG  | 4   | 40    | 38   | 0.4 + 0.4 | -8    | -8.8  | 2026-11-10 |
| 5 | beta     | BTCUSDT | LONG  | 1   | 100   | 120  | 0.5 + 0.5 | 20    | 19    | 2026-12-01 |

Net 11.7; 3 winners of 5 (60 %); gross profit 32.5, gross loss -20.8, profit factor
32.5 / 20.8 = 1.5625; average win 32.5 / 3 = 10.833333333333, average loss -10.4; fees 5.3.
Cumulative P&L 9, -3, 1.5, -7.3, 11.7: the peak 9 (equity 10,009) falls to -7.3, a
maximum drawdown of 16.3 = 0.16 % of 10,009. Daily 9 / -7.5 / -8.8 / 19; weekly (from
Monday) 2026-11-02: 1.5, 2026-11-09: -8.8, 2026-11-30: 19; monthly November -7.3,
December 19. By symbol BTCUSDT 16 (3 trades), ETHUSDT -4.3; by strategy alpha -7.3, beta 19.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from orders.ledger import ledger_open
from orders.models import Account, Position, TradeSetting
from processor.models import Strategy
from tests.orders.factories import make_instrument
from tests.orders.trade_history import RoundTrip, book_round_trip


def _at(day: int, hour: int, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, 0, 0, tzinfo=UTC)


TRIPS = [
    ("alpha", "BTCUSDT", RoundTrip("LONG", "1", "100", "110", "0.5", "0.5", _at(2, 10), _at(2, 11))),
    ("alpha", "BTCUSDT", RoundTrip("LONG", "2", "110", "105", "1", "1", _at(2, 12), _at(3, 9))),
    ("alpha", "ETHUSDT", RoundTrip("SHORT", "1", "50", "45", "0.25", "0.25", _at(3, 10), _at(3, 15))),
    ("alpha", "ETHUSDT", RoundTrip("LONG", "4", "40", "38", "0.4", "0.4", _at(9, 8), _at(10, 16))),
    ("beta", "BTCUSDT", RoundTrip("LONG", "1", "100", "120", "0.5", "0.5", _at(30, 23), _at(1, 1, month=12))),
]


@dataclass
class History:
    account: Account
    positions: list[Position]
    strategies: dict[str, Strategy]


def book_fixture_history(*, username: str, password: str = "pw-123456", prefix: str = "") -> History:
    """A user with one 10,000 account and the five closed trades above."""
    user = get_user_model().objects.create_user(username=username, password=password)
    account = Account.objects.create(owner=user, name="history", broker="paper", allocated_capital=Decimal(10000))
    ledger_open(account=account)
    strategies = {
        name: Strategy.objects.create(
            name=f"{prefix}{name}", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5}
        )
        for name in ("alpha", "beta")
    }
    for strategy in strategies.values():
        TradeSetting.objects.create(strategy=strategy, account=account, quantity=Decimal(1), enabled=False)
    positions = [
        book_round_trip(account, strategies[name], make_instrument(symbol=symbol), trip) for name, symbol, trip in TRIPS
    ]
    return History(account=account, positions=positions, strategies=strategies)


@dataclass
class HistoryWorld:
    history: History
    other: Account  # a second user's account with one closed trade of its own


def build_history_world() -> HistoryWorld:
    history = book_fixture_history(username="historian")
    other_user = get_user_model().objects.create_user(username="stranger", password="pw-123456")
    other = Account.objects.create(owner=other_user, name="theirs", broker="paper", allocated_capital=Decimal(5000))
    ledger_open(account=other)
    book_round_trip(
        other,
        history.strategies["alpha"],
        make_instrument(symbol="BTCUSDT"),
        RoundTrip("LONG", "3", "100", "90", "0.1", "0.1", _at(2, 10), _at(2, 13)),
    )
    return HistoryWorld(history=history, other=other)


@pytest.fixture(scope="module", name="history_world")
def history_world_fixture(django_db_setup: None, django_db_blocker: Any) -> Iterator[HistoryWorld]:
    """The fixture history, committed once per module (booking it runs durable transactions).

    Each test still runs in its own rolled-back transaction on top of it; the database is
    flushed at the end of the module, as a transactional test's data would be.
    """
    with django_db_blocker.unblock():
        world = build_history_world()
        yield world
        call_command("flush", interactive=False, verbosity=0)
