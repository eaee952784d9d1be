"""Exact conversions used by every parser: decimal strings, JSON numbers, ISO times."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feeds.market import FixedPointError, SCALE, parse_fixed
from feeds.venues.numbers import (
    decimal_to_fixed, fixed, fixed_uncached, iso_utc_to_ns, json_fixed, ms_to_ns,
)

PRICES = st.decimals(min_value=Decimal("-9999999999"), max_value=Decimal("9999999999"), places=8, allow_nan=False)


@settings(max_examples=500, deadline=None)
@given(PRICES, st.integers(min_value=0, max_value=4))
def test_fixed_equals_the_reference_parser_for_any_plain_decimal(value: Decimal, pad: int) -> None:
    text = format(value, "f") + ("0" * pad if "." in format(value, "f") else "")
    assert fixed_uncached(text) == parse_fixed(text) == int(value * SCALE)


@pytest.mark.parametrize("text", ["1_0", "1 ", " 1", "١٢", "", ".", "1e5", "1.2.3", "²", "0.000000001", "1" * 50, "nan"])
def test_fixed_refuses_what_is_not_a_plain_decimal_with_8_places(text: str) -> None:
    with pytest.raises(ValueError):
        fixed(text)


@settings(max_examples=300, deadline=None)
@given(PRICES)
def test_json_numbers_and_strings_decode_exactly(value: Decimal) -> None:
    text = format(value, "f")
    expected = int(value * SCALE)
    assert json_fixed(text.encode()) == expected
    assert json_fixed(f'"{text}"'.encode()) == expected
    assert json_fixed(format(value, "e").encode()) == expected


@pytest.mark.parametrize("raw", [b'"', b'"x"', b"1e99999999", b"NaN", b"null", b"1e-9", b"1" + b"0" * 60])
def test_json_fixed_refuses_non_numbers_and_out_of_range(raw: bytes) -> None:
    with pytest.raises(ValueError):
        json_fixed(raw)


def test_decimal_to_fixed_accepts_trailing_zeros_but_not_extra_places() -> None:
    assert decimal_to_fixed(Decimal("0.100000000000")) == 10_000_000
    with pytest.raises(FixedPointError):
        decimal_to_fixed(Decimal("0.000000001"))


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31)), st.integers(0, 999))
def test_iso_times_equal_the_standard_library_to_the_nanosecond(moment: datetime, extra_ns: int) -> None:
    aware = moment.replace(tzinfo=timezone.utc)
    expected = (aware - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000 + extra_ns
    text = aware.strftime("%Y-%m-%dT%H:%M:%S") + f".{aware.microsecond:06d}{extra_ns:03d}"
    assert iso_utc_to_ns(text) == expected
    assert iso_utc_to_ns(text + "Z") == expected
    milliseconds_only = text[:23]  # as bitFlyer REST may send
    assert iso_utc_to_ns(milliseconds_only) == expected - expected % 1_000_000


@pytest.mark.parametrize("text", [
    "2026-09-23T10:44:3x", "2026-09-23T25:44:33", "2026-09-23 10:44:33", "2026-09-23T10:44:33.",
    "2026-09-23T10:44:61", "2026-13-23T10:44:33", "2026-09-23T10:44:33.1234567890", "yesterday",
])
def test_malformed_iso_times_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        iso_utc_to_ns(text)


def test_exchange_times_outside_2000_to_2100_are_refused() -> None:
    assert ms_to_ns(1_732_924_800_123) == 1_732_924_800_123_000_000
    for ms in (123_456_785, 1_732_924_800_123_000):  # seconds-as-ms and ns-as-ms mistakes
        with pytest.raises(ValueError):
            ms_to_ns(ms)
