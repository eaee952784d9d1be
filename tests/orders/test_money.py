"""Exact order arithmetic: rounding, notional, reservations and pro-rata releases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fixed_point import SCALE
from feeds.market import parse_fixed
from orders.money import Rounding, divide, entry_reservation, notional, pro_rata, round_to_step


def test_round_to_step_goes_down_or_up_to_the_step() -> None:
    tick = parse_fixed("0.1")
    assert round_to_step(parse_fixed("50000.17"), tick) == parse_fixed("50000.1")
    assert round_to_step(parse_fixed("50000.17"), tick, up=True) == parse_fixed("50000.2")
    assert round_to_step(parse_fixed("50000.1"), tick, up=True) == parse_fixed("50000.1")


def test_notional_is_exact_where_float_is_not() -> None:
    # 0.1 * 0.2 + ... : the classic float trap, here as quantity * price.
    assert notional(parse_fixed("0.3"), parse_fixed("0.1")) == parse_fixed("0.03")
    assert notional(parse_fixed("0.001"), parse_fixed("50000.1"), SCALE) == parse_fixed("50.0001")


def test_divide_rounds_half_to_even() -> None:
    assert divide(5, 2, Rounding.HALF_EVEN) == 2
    assert divide(7, 2, Rounding.HALF_EVEN) == 4
    assert divide(7, 2, Rounding.UP) == 4
    assert divide(7, 2, Rounding.DOWN) == 3


def test_entry_reservation_covers_notional_buffer_and_fee() -> None:
    reserve = entry_reservation(parse_fixed("1"), parse_fixed("100"), SCALE, buffer_bps=50, fee_bps=10)
    # 100 + 0.5% = 100.5, plus 0.1% fee = 100.6005
    assert reserve == parse_fixed("100.6005")


@settings(deadline=None, max_examples=200)
@given(
    total=st.integers(min_value=0, max_value=10**18),
    steps=st.lists(st.integers(min_value=1, max_value=10**9), min_size=1, max_size=20),
)
def test_pro_rata_releases_add_up_to_the_whole(total: int, steps: list[int]) -> None:
    whole = sum(steps)
    done, released = 0, 0
    for step in steps:
        released += pro_rata(total, done + step, whole) - pro_rata(total, done, whole)
        done += step
    assert released == total


def test_pro_rata_refuses_parts_outside_the_whole() -> None:
    with pytest.raises(ValueError):
        pro_rata(10, 11, 10)
