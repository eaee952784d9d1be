"""Keys' TTLs: channel cadence times a multiplier, with operator overrides."""

from __future__ import annotations

import pytest

from feeds.distribution.redispub.catalog import (
    CadencePolicy,
    Catalog,
    FeedEntry,
    InstrumentEntry,
    parse_cadence_overrides,
)


def feed(venue: str = "binance-usdm", settings: dict[str, object] | None = None) -> FeedEntry:
    return FeedEntry(
        name="f",
        venue=venue,
        market_type="perpetual",
        settings=settings or {},
        instruments={"BTCUSDT": InstrumentEntry("BTC-USDT", "BTCUSDT", frozenset({"trades"}))},
    )


def test_ttl_is_the_channel_cadence_times_the_multiplier() -> None:
    policy = CadencePolicy(3.0)
    assert policy.ttl_ms(feed(), "mark_price") == 3_000
    assert policy.ttl_ms(feed(), "funding") == 180_000  # one number would expire it between updates
    assert policy.ttl_ms(feed(), "trades") == 15_000


def test_a_venue_override_beats_a_channel_override_which_beats_the_default() -> None:
    policy = CadencePolicy(2.0, parse_cadence_overrides(["trades=10", "binance-usdm:trades=0.5"]))
    assert policy.ttl_ms(feed(), "trades") == 1_000
    assert policy.ttl_ms(feed("kucoin-futures"), "trades") == 20_000


def test_the_simulated_feed_interval_is_its_cadence() -> None:
    assert CadencePolicy(3.0).ttl_ms(feed("simulated", {"interval_ms": 250}), "trades") == 750


@pytest.mark.parametrize("bad", ["trades", "trades=", "trades=0", "=5", "trades=abc"])
def test_malformed_overrides_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="seconds"):
        parse_cadence_overrides([bad])


def test_catalog_builds_the_instrument_key_from_our_symbol() -> None:
    entry = feed()
    catalog = Catalog("md", {"f": entry}, CadencePolicy())
    assert catalog.key(entry, entry.instruments["BTCUSDT"], "trades") == "md:binance-usdm:perpetual:BTC-USDT:trades"
    assert catalog.venues() == {"binance-usdm": [entry]}
