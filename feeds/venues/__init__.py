"""The venue registry: one module per venue, each exporting VENUE."""

from __future__ import annotations

from feeds.venues import binance_usdm, bitflyer, dzengi, kucoin_futures, replay, simulated, tabdeal, upstox
from feeds.venues.base import Venue

VENUES: dict[str, Venue] = {
    module.VENUE.name: module.VENUE
    for module in (simulated, replay, binance_usdm, bitflyer, kucoin_futures, upstox, dzengi, tabdeal)
}


def get_venue(name: str) -> Venue:
    try:
        return VENUES[name]
    except KeyError:
        raise LookupError(f"unknown venue {name!r}; known: {sorted(VENUES)}") from None


def venue_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(VENUES)]
