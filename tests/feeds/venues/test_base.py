"""The shared venue interface: exchange venues open through the registered transport."""
from __future__ import annotations

from typing import AsyncIterator

import pytest

from feeds.venues import VENUES, base
from feeds.venues.base import ExchangeVenue, FeedSpec, StatelessStream


class FakeSource:
    def __init__(self, venue: ExchangeVenue, feed: FeedSpec) -> None:
        self.venue, self.feed = venue, feed

    async def batches(self) -> AsyncIterator[list[bytes]]:
        yield []


EXCHANGES = ["binance-usdm", "bitflyer", "kucoin-futures", "upstox"]


@pytest.mark.parametrize("name", EXCHANGES)
def test_exchange_venues_open_through_the_registered_transport(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_transport_factory", [])
    feed = FeedSpec("f", name, {})
    with pytest.raises(LookupError):
        VENUES[name].open(feed)
    base.register_websocket_transport(FakeSource)
    source = VENUES[name].open(feed)
    assert isinstance(source, FakeSource) and source.venue is VENUES[name] and source.feed is feed


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
