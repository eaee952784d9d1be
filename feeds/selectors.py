"""Read paths of the feeds app."""

from __future__ import annotations

from feeds.models import Feed, Subscription
from feeds.venues import get_venue
from feeds.venues.base import FeedSpec, InstrumentSpec


class FeedSelectionError(LookupError):
    """A feed that was asked for by name is missing or disabled."""


def feed_specs_for_run(names: list[str] | None) -> list[FeedSpec]:
    """Return the enabled feeds (all, or those named) with their subscribed instruments and channels."""
    feeds = Feed.objects.filter(enabled=True)
    if names:
        feeds = feeds.filter(name__in=names)
        found = {feed.name for feed in feeds}
        missing = [name for name in names if name not in found]
        if missing:
            known = ", ".join(Feed.objects.values_list("name", flat=True)) or "none"
            raise FeedSelectionError(f"no enabled feed named {', '.join(missing)} (feeds: {known})")
    subscriptions = (
        Subscription.objects.filter(enabled=True, instrument__feed__in=feeds)
        .select_related("instrument")
        .order_by("instrument__symbol", "channel")
    )
    channels: dict[int, list[str]] = {}
    instruments = {}
    for sub in subscriptions:
        channels.setdefault(sub.instrument_id, []).append(sub.channel)
        instruments[sub.instrument_id] = sub.instrument
    by_feed: dict[int, list[InstrumentSpec]] = {}
    for instrument_id, instrument in instruments.items():
        by_feed.setdefault(instrument.feed_id, []).append(
            InstrumentSpec(
                venue_symbol=instrument.venue_symbol,
                tick_size=format(instrument.tick_size.normalize(), "f"),
                lot_size=format(instrument.lot_size.normalize(), "f"),
                channels=tuple(channels[instrument_id]),
            )
        )
    return [
        FeedSpec(
            name=feed.name,
            venue=feed.venue,
            settings=get_venue(feed.venue).clean_settings(feed.settings),
            instruments=tuple(by_feed.get(feed.pk, ())),
        )
        for feed in feeds
    ]


def symbol_names(feed_names: list[str]) -> dict[tuple[str, str], str]:
    """Map (feed, venue symbol) to our symbol for the given feeds."""
    rows = Subscription.objects.filter(instrument__feed__name__in=feed_names).values_list(
        "instrument__feed__name", "instrument__venue_symbol", "instrument__symbol"
    )
    return {(feed, venue_symbol): symbol for feed, venue_symbol, symbol in rows}
