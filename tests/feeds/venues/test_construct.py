"""The fast event constructors build the same, still frozen, instances as the dataclasses."""

from __future__ import annotations

import dataclasses

import pytest

from feeds.market import BookTicker, FundingRate, MarketData, MarkPrice, Side, Ticker
from feeds.venues.construct import fast_constructor

SAMPLES = [
    MarketData("BTCUSDT", 1, 2, 3, 4, "5", Side.BUY, 6, 7),
    MarketData("BTCUSDT", 1, 2, 3, 4),
    MarkPrice("BTCUSDT", 1, 2, 3, 4, 5, 6),
    MarkPrice("BTCUSDT", 1, 2, 3),
    FundingRate("XBTUSDTM", -225, 2, 3),
    Ticker("BTC_JPY", 1, 2, 3, best_bid=4),
    BookTicker("BNBUSDT", 1, 2, 3, 4, 5, 6, 7),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_fast_constructor_gives_an_equal_instance(sample: object) -> None:
    values = {field.name: getattr(sample, field.name) for field in dataclasses.fields(sample)}  # type: ignore[arg-type]
    make = fast_constructor(type(sample))
    assert make(**values) == sample
    assert make(*values.values()) == sample
    assert hash(make(**values)) == hash(sample)


def test_defaults_are_the_dataclass_defaults() -> None:
    assert fast_constructor(MarketData)("X", 1, 2, 3, 4) == MarketData("X", 1, 2, 3, 4)


def test_instances_stay_frozen() -> None:
    event = fast_constructor(MarketData)("X", 1, 2, 3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.price = 5  # type: ignore[misc]


def test_missing_required_field_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        fast_constructor(MarketData)("X", 1)
