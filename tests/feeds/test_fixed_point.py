"""Fixed-point numbers are exact: parsed from decimal strings without float, at
SCALE_DIGITS (12) places, inside one documented range (|value| <= FIXED_MAX_ABS)."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core.fixed_point import FIXED_MAX_ABS, MAX_WHOLE_DIGITS, SCALE, SCALE_DIGITS, FixedPointError, fixed_to_str
from feeds.market import fixed_from_decimal, fixed_from_whole, fixed_to_decimal, parse_fixed


def test_the_scale_is_twelve_places_and_the_range_is_eighteen_whole_digits() -> None:
    assert SCALE_DIGITS >= 12 and SCALE == 10**SCALE_DIGITS
    assert fixed_to_str(FIXED_MAX_ABS) == "9" * MAX_WHOLE_DIGITS + "." + "9" * SCALE_DIGITS
    assert fixed_to_str(-FIXED_MAX_ABS) == "-" + fixed_to_str(FIXED_MAX_ABS)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.1", SCALE // 10),
        ("64012.50", 64_012_500_000_000_000),
        ("-0.000000000001", -1),
        ("7", 7 * SCALE),
        (".5", SCALE // 2),
        ("5.", 5 * SCALE),
        ("+1.25", 1_250_000_000_000),
        ("0.123456789012000", 123_456_789_012),
        ("0.000000000012", 12),
        ("0.000000012", 12_000),
        ("15000000", 15_000_000 * SCALE),
        ("000000000000000000000001", SCALE),
        ("999999999999999999.999999999999", FIXED_MAX_ABS),
    ],
)
def test_parse_fixed_is_exact(text: str, value: int) -> None:
    assert parse_fixed(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "-",
        "1e5",
        "NaN",
        "1,5",
        " 1",
        "0x10",
        "1.2.3",
        "0.0000000000001",  # 13 places
        "1000000000000000000",  # 19 whole digits: beyond FIXED_MAX_ABS
        "-1000000000000000000.5",
        "9" * 5000,  # refused on its length, never built as an integer
    ],
)
def test_parse_fixed_refuses_what_it_cannot_represent_exactly(text: str) -> None:
    with pytest.raises(FixedPointError):
        parse_fixed(text)


def test_float_artifacts_cannot_sneak_in() -> None:
    assert parse_fixed("0.1") + parse_fixed("0.2") == parse_fixed("0.3")


def exact_scaled(value: Decimal) -> int:
    with localcontext() as context:
        context.prec = 80
        return int(value * SCALE)


def as_decimal(units: int) -> Decimal:
    """`units` of 10**-SCALE_DIGITS as a Decimal, built from digits (no context rounding)."""
    return Decimal(f"{units}E-{SCALE_DIGITS}")


# Every value in the range, in units of the last place; Hypothesis's own decimals()
# rounds its bounds to 28 digits.
decimals = st.integers(min_value=-FIXED_MAX_ABS, max_value=FIXED_MAX_ABS).map(as_decimal)


@hsettings(deadline=None, max_examples=300)
@given(decimals)
def test_round_trip_through_strings_and_decimals_over_the_whole_range(value: Decimal) -> None:
    with localcontext() as context:
        context.prec = 80
        text = format(value, "f")
    fixed = parse_fixed(text)
    assert fixed == exact_scaled(value)
    assert fixed_to_decimal(fixed) == value
    assert Decimal(fixed_to_str(fixed)) == value
    assert fixed_from_decimal(value) == fixed


def test_decimals_wider_than_the_default_context_are_not_rounded() -> None:
    # 30 significant digits: Decimal's default context (28) would round them.
    value = Decimal("123456789012345678.123456789012")
    assert fixed_from_decimal(value) == 123456789012345678123456789012
    assert fixed_to_decimal(123456789012345678123456789012) == value


@pytest.mark.parametrize(
    "value",
    [
        Decimal("0.0000000000001"),
        Decimal("1E18"),
        Decimal("-1E18"),
        Decimal("NaN"),
        Decimal("Infinity"),
        Decimal("1E999999999"),
    ],
)
def test_fixed_from_decimal_refuses_rounding_and_values_out_of_range(value: Decimal) -> None:
    with pytest.raises(FixedPointError):
        fixed_from_decimal(value)


def test_fixed_from_decimal_accepts_exponents_and_trailing_zeros_exactly() -> None:
    assert fixed_from_decimal(Decimal("1.2E-11")) == 12
    assert fixed_from_decimal(Decimal("1E+5")) == 100_000 * SCALE
    assert fixed_from_decimal(Decimal("0." + "0" * 5000 + "")) == 0
    assert fixed_from_decimal(Decimal("2." + "0" * 5000)) == 2 * SCALE


def test_whole_units_are_range_checked() -> None:
    assert fixed_from_whole(1_000) == 1_000 * SCALE
    with pytest.raises(FixedPointError):
        fixed_from_whole(10**MAX_WHOLE_DIGITS)
    with pytest.raises(FixedPointError):
        fixed_from_whole(-(2**63))
