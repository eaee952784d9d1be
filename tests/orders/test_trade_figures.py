"""A closed position keeps what it was: entry and exit quantities, prices, fees, times and why it closed."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from feeds.market import parse_fixed
from orders.models import LedgerEntry, Position
from orders.trade_figures import entry_price, exit_price
from tests.orders.trade_fixture import HistoryWorld, history_world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def test_a_closed_long_keeps_its_entry_and_exit_figures(history_world: HistoryWorld) -> None:
    position = Position.objects.select_related("instrument").get(pk=history_world.history.positions[0].pk)
    assert position.state == Position.State.CLOSED
    assert (position.quantity, position.cost, position.average_price) == (0, 0, None)  # what closing zeroes
    assert position.entry_quantity == parse_fixed("1") == position.exit_quantity
    assert (entry_price(position), exit_price(position)) == (Decimal(100), Decimal(110))
    assert position.fees == parse_fixed("1")
    assert position.realized_pnl == parse_fixed("9")  # 10 gross less both fees
    assert position.entry_at == datetime(2026, 11, 2, 10, tzinfo=UTC)
    assert position.exit_at == datetime(2026, 11, 2, 11, tzinfo=UTC)
    assert position.exit_reason == "EXIT_LONG"


def test_a_closed_short_keeps_its_figures(history_world: HistoryWorld) -> None:
    position = Position.objects.select_related("instrument").get(pk=history_world.history.positions[2].pk)
    assert position.side == "SHORT" and position.exit_reason == "EXIT_SHORT"
    assert (entry_price(position), exit_price(position)) == (Decimal(50), Decimal(45))
    assert position.realized_pnl == parse_fixed("4.5")


def test_the_trades_add_up_to_the_ledger_journal(history_world: HistoryWorld) -> None:
    account = history_world.history.account
    closed = sum(Position.objects.filter(account=account).values_list("realized_pnl", flat=True))
    journal = sum(LedgerEntry.objects.filter(account=account).values_list("delta_realized_pnl", flat=True))
    assert closed == journal == parse_fixed("11.7")


def test_the_positions_api_shows_a_closed_positions_figures(history_world: HistoryWorld, client) -> None:  # type: ignore[no-untyped-def]
    client.force_login(history_world.history.account.owner)
    position = history_world.history.positions[1]
    body = client.get(f"/api/positions/{position.pk}/").json()
    assert body["quantity"] == "0" and body["average_price"] is None
    assert body["entry_quantity"] == "2" and body["exit_quantity"] == "2"
    assert (body["entry_price"], body["exit_price"], body["fees"]) == ("110", "105", "2")
    assert body["entry_at"].startswith("2026-11-02T12:00:00") and body["exit_reason"] == "EXIT_LONG"


@pytest.mark.django_db(transaction=True)
def test_a_trade_closed_by_reconciliation_says_so() -> None:
    from tests.orders.factories import make_instrument, make_setup
    from tests.orders.trade_history import RoundTrip, book_round_trip

    setup = make_setup(capital="1000")
    at = datetime(2026, 11, 2, 10, tzinfo=UTC)
    trip = RoundTrip("SHORT", "2", "10", "12", "0.01", "0.02", at, at.replace(hour=12))
    position = book_round_trip(
        setup.account, setup.strategy, make_instrument(symbol="XRPUSDT"), trip, exit_via_reconciliation=True
    )
    assert position.exit_reason == "reconciliation"
    assert (position.realized_pnl, position.fees) == (parse_fixed("-4.03"), parse_fixed("0.03"))
