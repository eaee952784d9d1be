"""The shared venue interface: what every adapter declares, and which venues open frame sources."""

from __future__ import annotations

import pytest

from feeds.venues import VENUES
from feeds.venues.base import PublishedLimits, StatelessStream

EXCHANGES = ["binance-usdm", "bitflyer", "kucoin-futures", "tabdeal", "upstox", "dzengi"]


@pytest.mark.parametrize("name", sorted(VENUES))
def test_only_local_venues_open_a_frame_source(name: str) -> None:
    # Exchange venues are dialled by the stream runtime from their endpoints; only the
    # simulated and replay venues hand out frames themselves.
    venue = VENUES[name]
    assert callable(getattr(venue, "open", None)) is (name not in EXCHANGES)
    assert callable(getattr(venue, "endpoints", None)) is (name in EXCHANGES)


def test_stateless_stream_passes_events_through() -> None:
    events: list = [object()]
    assert StatelessStream().apply(events) is events


@pytest.mark.parametrize("name", sorted(VENUES))
def test_every_venue_names_its_channels_and_cleans_its_defaults(name: str) -> None:
    venue = VENUES[name]
    # Every venue streams trades except Tabdeal, whose public futures data is the order book.
    assert venue.name == name and ("trades" in venue.channels or venue.channels == {"order_book"})
    if name == "replay":
        assert venue.clean_settings({"path": "ticks.csv"})["path"] == "ticks.csv"
    else:
        assert isinstance(venue.clean_settings({}), dict)


@pytest.mark.parametrize("name", sorted(VENUES))
def test_every_venue_declares_its_limits_and_what_it_trades(name: str) -> None:
    from feeds.models import MarketType
    from feeds.streams.venue_limiter import RateLimiterRegistry

    venue = VENUES[name]
    assert isinstance(venue.limits, PublishedLimits)
    assert venue.default_market_type in MarketType.values
    # The runtime's buckets take the venue's own figures: no list of venues elsewhere.
    assert RateLimiterRegistry().for_venue(name).limits is venue.limits


def test_the_published_figures_stand_where_the_venue_publishes_them() -> None:
    assert VENUES["binance-usdm"].limits.rest_weight == 2400 and VENUES["binance-usdm"].limits.messages_per_s == 10
    assert VENUES["bitflyer"].limits.rest_weight == 500 and VENUES["bitflyer"].limits.messages_per_s is None
    assert {name: venue.default_market_type for name, venue in VENUES.items()} == {
        "binance-usdm": "perpetual",
        "bitflyer": "spot",
        "kucoin-futures": "perpetual",
        "replay": "spot",
        "simulated": "simulated",
        "tabdeal": "perpetual",
        "upstox": "spot",
        "dzengi": "spot",
    }
