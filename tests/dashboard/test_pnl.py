"""Unrealized P&L is exact fixed point, signed by the position's side."""

from __future__ import annotations

from dashboard.pnl import unrealized_pnl
from feeds.market import parse_fixed as f


def test_long_gains_when_the_price_rises_and_short_loses() -> None:
    cost = f("500.1")  # 0.01 at 50010
    assert unrealized_pnl(side="LONG", quantity=f("0.01"), cost=cost, last_price=f("51000")) == f("9.9")
    assert unrealized_pnl(side="SHORT", quantity=f("0.01"), cost=cost, last_price=f("51000")) == -f("9.9")


def test_contract_multiplier_scales_the_mark() -> None:
    assert unrealized_pnl(side="LONG", quantity=f("2"), cost=f("2000"), last_price=f("101"), multiplier=f("10")) == f(
        "20"
    )


def test_no_price_is_no_figure_and_a_flat_position_is_zero() -> None:
    assert unrealized_pnl(side="LONG", quantity=f("1"), cost=f("100"), last_price=None) is None
    assert unrealized_pnl(side="LONG", quantity=0, cost=0, last_price=f("100")) == 0


def test_no_float_error_where_float_would_have_one() -> None:
    # 0.1 + 0.2 style: 3 x 0.1 at 0.3 cost is exactly zero P&L.
    assert unrealized_pnl(side="LONG", quantity=f("3"), cost=f("0.3"), last_price=f("0.1")) == 0
