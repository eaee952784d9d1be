"""The shared venue interface: what every adapter declares, and which venues open frame sources."""
from __future__ import annotations

import pytest

from feeds.venues import VENUES
from feeds.venues.base import StatelessStream


EXCHANGES = ["binance-usdm", "bitflyer", "kucoin-futures", "upstox"]


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
    assert venue.name == name and "trades" in venue.channels
    if name == "replay":
        assert venue.clean_settings({"path": "ticks.csv"})["path"] == "ticks.csv"
    else:
        assert isinstance(venue.clean_settings({}), dict)
