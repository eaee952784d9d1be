"""The hand-computed trade history (tests.orders.trade_fixture) for user carol in the e2e site's
database (run in a subprocess, as site_setup is)."""

from __future__ import annotations

import json

from tests.orders.trade_fixture import book_fixture_history


def main(password: str) -> None:
    history = book_fixture_history(username="carol", password=password, prefix="carol-")
    print(json.dumps({name: strategy.pk for name, strategy in history.strategies.items()}))
