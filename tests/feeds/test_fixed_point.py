"""Fixed-point numbers are exact: parsed from decimal strings without float."""
from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from feeds.market import SCALE, FixedPointError, fixed_from_decimal, fixed_to_decimal, fixed_to_str, parse_fixed


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.1", SCALE // 10), ("64012.50", 6_401_250_000_000), ("-0.00000001", -1), ("7", 7 * SCALE),
     (".5", SCALE // 2), ("5.", 5 * SCALE), ("+1.25", 125_000_000), ("0.123456780000", 12_345_678)],
)
def test_parse_fixed_is_exact(text: str, value: int) -> None:
    assert parse_fixed(text) == value


@pytest.mark.parametrize("text", ["", ".", "-", "1e5", "NaN", "1,5", " 1", "0x10", "1.2.3", "0.000000001"])
def test_parse_fixed_refuses_what_it_cannot_represent_exactly(text: str) -> None:
    with pytest.raises(FixedPointError):
        parse_fixed(text)


def test_float_artifacts_cannot_sneak_in() -> None:
    assert parse_fixed("0.1") + parse_fixed("0.2") == parse_fixed("0.3")


decimals = st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=8, allow_nan=False, allow_infinity=False)


@hsettings(deadline=None, max_examples=300)
@given(decimals)
def test_round_trip_through_strings_and_decimals(value: Decimal) -> None:
    text = format(value, "f")
    fixed = parse_fixed(text)
    assert fixed_to_decimal(fixed) == value
    assert Decimal(fixed_to_str(fixed)) == value
    assert fixed_from_decimal(value) == fixed


def test_fixed_from_decimal_refuses_rounding() -> None:
    with pytest.raises(FixedPointError):
        fixed_from_decimal(Decimal("0.000000001"))
