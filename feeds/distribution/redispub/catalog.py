"""What one process publishes: its feeds, their instruments and channels, keys and TTLs.

A key's TTL is its channel's cadence times a multiplier, so a key outlives a few
missed updates and no more. Cadence is per venue and channel (KuCoin sends funding
every minute against a mark price every second: one number would expire the slower
key between updates). It resolves, first match wins: the operator's override for
`venue:channel`, then for `channel`; the venue module's optional `channel_cadence_s`;
the feed's own `interval_ms` setting (the simulated venue); the defaults below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from feeds.distribution.redispub.keys import stream_key
from feeds.models import Feed, Subscription
from feeds.venues import get_venue

# Seconds between updates when nothing more specific is known. Trades have no cadence
# (a quiet market prints nothing); 5 s keeps a quiet instrument's key from flapping
# while still noticing a dead socket within a TTL.
DEFAULT_CADENCE_S: dict[str, float] = {
    "trades": 5.0,
    "mark_price": 1.0,
    "funding": 60.0,
    "ticker": 2.0,
    "book_ticker": 1.0,
}
FALLBACK_CADENCE_S = 5.0


@dataclass(frozen=True)
class InstrumentEntry:
    symbol: str  # ours, used in keys
    venue_symbol: str  # the venue's, as events carry it
    channels: frozenset[str]  # subscribed venue channels


@dataclass(frozen=True)
class FeedEntry:
    name: str
    venue: str
    market_type: str
    settings: Mapping[str, object]
    instruments: Mapping[str, InstrumentEntry]  # by venue symbol


@dataclass(frozen=True)
class CadencePolicy:
    multiplier: float = 3.0
    overrides_s: Mapping[str, float] = field(default_factory=dict)  # "venue:channel" or "channel"

    def cadence_s(self, feed: FeedEntry, channel: str) -> float:
        for override in (f"{feed.venue}:{channel}", channel):
            if override in self.overrides_s:
                return self.overrides_s[override]
        venue_cadence = getattr(get_venue(feed.venue), "channel_cadence_s", None) or {}
        if channel in venue_cadence:
            return float(venue_cadence[channel])
        interval_ms = feed.settings.get("interval_ms")
        if isinstance(interval_ms, int) and not isinstance(interval_ms, bool) and interval_ms > 0:
            return interval_ms / 1000
        return DEFAULT_CADENCE_S.get(channel, FALLBACK_CADENCE_S)

    def ttl_ms(self, feed: FeedEntry, channel: str) -> int:
        return max(1, round(self.cadence_s(feed, channel) * self.multiplier * 1000))


def parse_cadence_overrides(items: list[str]) -> dict[str, float]:
    """Return {"venue:channel" or "channel": seconds} from "name=seconds" items."""
    overrides: dict[str, float] = {}
    for item in items:
        name, sep, seconds = item.partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = -1.0
        if not sep or not name.strip() or value <= 0:
            raise ValueError(f"{item!r} is not channel=seconds or venue:channel=seconds with seconds > 0")
        overrides[name.strip()] = value
    return overrides


class Catalog:
    """Keys and TTLs of the feeds one process publishes; lookups are cached dict reads."""

    def __init__(self, prefix: str, feeds: Mapping[str, FeedEntry], cadence: CadencePolicy) -> None:
        self.prefix = prefix
        self.feeds = dict(feeds)
        self.cadence = cadence
        self._keys: dict[tuple[str, str, str], str] = {}
        self._ttls: dict[tuple[str, str], int] = {}

    def key(self, feed: FeedEntry, instrument: InstrumentEntry, channel: str) -> str:
        cache_key = (feed.name, instrument.venue_symbol, channel)
        key = self._keys.get(cache_key)
        if key is None:
            key = self._keys[cache_key] = stream_key(
                self.prefix, feed.venue, feed.market_type, instrument.symbol, channel
            )
        return key

    def ttl_ms(self, feed: FeedEntry, channel: str) -> int:
        ttl = self._ttls.get((feed.name, channel))
        if ttl is None:
            ttl = self._ttls[(feed.name, channel)] = self.cadence.ttl_ms(feed, channel)
        return ttl

    def venues(self) -> dict[str, list[FeedEntry]]:
        by_venue: dict[str, list[FeedEntry]] = {}
        for feed in self.feeds.values():
            by_venue.setdefault(feed.venue, []).append(feed)
        return by_venue


def catalog_feeds(feed_names: list[str]) -> dict[str, FeedEntry]:
    """Return the named feeds with their instruments that have an enabled subscription."""
    feeds = {feed.pk: feed for feed in Feed.objects.filter(name__in=feed_names)}
    channels: dict[tuple[int, str, str], set[str]] = {}
    rows = Subscription.objects.filter(enabled=True, instrument__feed__in=feeds.keys()).values_list(
        "instrument__feed_id",
        "instrument__symbol",
        "instrument__venue_symbol",
        "channel",
    )
    for feed_id, symbol, venue_symbol, channel in rows:
        channels.setdefault((feed_id, symbol, venue_symbol), set()).add(channel)
    instruments: dict[int, dict[str, InstrumentEntry]] = {pk: {} for pk in feeds}
    for (feed_id, symbol, venue_symbol), subscribed in channels.items():
        instruments[feed_id][venue_symbol] = InstrumentEntry(symbol, venue_symbol, frozenset(subscribed))
    return {
        feed.name: FeedEntry(
            name=feed.name,
            venue=feed.venue,
            market_type=feed.market_type,
            settings=get_venue(feed.venue).clean_settings(feed.settings or {}),
            instruments=instruments[pk],
        )
        for pk, feed in feeds.items()
    }
