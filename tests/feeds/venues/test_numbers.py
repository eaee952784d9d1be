"""Exact conversions used by every parser: decimal strings, JSON numbers, ISO times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fixed_point import FIXED_MAX_ABS, MAX_WHOLE_DIGITS, SCALE_DIGITS, FixedPointError
from feeds.market import parse_fixed
from feeds.venues.numbers import (
    decimal_to_fixed,
    fixed,
    fixed_positive,
    fixed_uncached,
    iso_utc_to_ns,
    json_fixed,
    ms_to_ns,
    whole_to_fixed,
)


def scaled(value: Decimal) -> int:
    """The exact fixed-point value of `value` (a wide context: 30 digits would round at 28)."""
    with localcontext() as context:
        context.prec = 80
        return int(value.scaleb(SCALE_DIGITS))


def as_decimal(units: int) -> Decimal:
    return Decimal(f"{units}E-{SCALE_DIGITS}")


# Every value in the documented range, in units of the last place.
PRICES = st.integers(min_value=-FIXED_MAX_ABS, max_value=FIXED_MAX_ABS).map(as_decimal)


def plain(value: Decimal) -> str:
    with localcontext() as context:
        context.prec = 80
        return format(value, "f")


@settings(max_examples=500, deadline=None)
@given(PRICES, st.integers(min_value=0, max_value=4))
def test_fixed_equals_the_reference_parser_for_any_plain_decimal(value: Decimal, pad: int) -> None:
    text = plain(value) + ("0" * pad if "." in plain(value) else "")
    assert fixed_uncached(text) == parse_fixed(text) == scaled(value)


def test_twelve_places_reach_the_last_digit() -> None:
    assert fixed("0.000000000012") == 12
    assert json_fixed(b"0.00000000012") == 120
    assert json_fixed(b"1.2e-11") == 12
    assert json_fixed(b'"0.000000012"') == 12_000
    assert fixed("15000000.5") == 15_000_000_500_000_000_000  # BTC_JPY: beyond int64 at 12 places


@pytest.mark.parametrize(
    "text",
    [
        "1_0",
        "1 ",
        " 1",
        "١٢",
        "",
        ".",
        "1e5",
        "1.2.3",
        "²",
        "nan",
        "0.0000000000001",  # 13 places
        "1" * 19,
        "1" * 19 + ".5",
        "-" + "1" * 19,  # beyond FIXED_MAX_ABS
        "1" * 50,
        "0" * 60 + "1",  # too long to be a number a venue sends
    ],
)
def test_fixed_refuses_what_is_not_a_plain_decimal_in_range(text: str) -> None:
    with pytest.raises(FixedPointError):
        fixed(text)


def test_the_range_edge_is_inclusive() -> None:
    edge = "9" * MAX_WHOLE_DIGITS + "." + "9" * SCALE_DIGITS
    assert fixed(edge) == FIXED_MAX_ABS
    assert json_fixed(edge.encode()) == FIXED_MAX_ABS
    assert fixed("-" + edge) == -FIXED_MAX_ABS
    assert fixed("0" * 5 + "1") == 10**SCALE_DIGITS  # leading zeros past the fast path still parse


@settings(max_examples=300, deadline=None)
@given(PRICES)
def test_json_numbers_and_strings_decode_exactly(value: Decimal) -> None:
    text = plain(value)
    expected = scaled(value)
    assert json_fixed(text.encode()) == expected
    assert json_fixed(f'"{text}"'.encode()) == expected
    assert json_fixed(format(value, "e").encode()) == expected


@pytest.mark.parametrize(
    "raw",
    [
        b'"',
        b'"x"',
        b"1e99999999",
        b"NaN",
        b"null",
        b"1e-13",
        b"1" + b"0" * 60,
        b"1e18",
        b"-1.5e18",
        b"1000000000000000000",
        b"1_0e1",
        b" 1e5",
        b"\xff1",
        "١e1".encode(),
    ],
)
def test_json_fixed_refuses_non_numbers_and_out_of_range(raw: bytes) -> None:
    with pytest.raises(FixedPointError):
        json_fixed(raw)


def test_decimal_to_fixed_accepts_trailing_zeros_but_not_extra_places() -> None:
    assert decimal_to_fixed(Decimal("0.100000000000000")) == 100_000_000_000
    with pytest.raises(FixedPointError):
        decimal_to_fixed(Decimal("0.0000000000001"))
    with pytest.raises(FixedPointError):
        decimal_to_fixed(Decimal("1E18"))


def test_integer_quantities_are_range_checked() -> None:
    assert whole_to_fixed(25) == 25 * 10**SCALE_DIGITS
    with pytest.raises(FixedPointError):
        whole_to_fixed(2**63 - 1)  # an int64 protobuf field: fits the wire, not the range


def test_positive_refuses_zero_and_negative() -> None:
    assert fixed_positive("0.000000000001") == 1
    for text in ("0", "-1", "0.000"):
        with pytest.raises(FixedPointError):
            fixed_positive(text)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31)), st.integers(0, 999))
def test_iso_times_equal_the_standard_library_to_the_nanosecond(moment: datetime, extra_ns: int) -> None:
    aware = moment.replace(tzinfo=UTC)
    expected = (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000 + extra_ns
    text = aware.strftime("%Y-%m-%dT%H:%M:%S") + f".{aware.microsecond:06d}{extra_ns:03d}"
    assert iso_utc_to_ns(text) == expected
    assert iso_utc_to_ns(text + "Z") == expected
    milliseconds_only = text[:23]  # as bitFlyer REST may send
    assert iso_utc_to_ns(milliseconds_only) == expected - expected % 1_000_000


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-23T10:44:3x",
        "2026-09-23T25:44:33",
        "2026-09-23 10:44:33",
        "2026-09-23T10:44:33.",
        "2026-09-23T10:44:61",
        "2026-13-23T10:44:33",
        "2026-09-23T10:44:33.1234567890",
        "yesterday",
    ],
)
def test_malformed_iso_times_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        iso_utc_to_ns(text)


def test_exchange_times_outside_2000_to_2100_are_refused() -> None:
    assert ms_to_ns(1_732_924_800_123) == 1_732_924_800_123_000_000
    for ms in (123_456_785, 1_732_924_800_123_000):  # seconds-as-ms and ns-as-ms mistakes
        with pytest.raises(ValueError):
            ms_to_ns(ms)
