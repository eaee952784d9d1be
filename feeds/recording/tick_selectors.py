"""Read paths over recorded ticks and the instruments they belong to."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Q, QuerySet
from django.db.models.functions import Length

from feeds.models import Instrument, Tick
from feeds.recording.tick_address import TickAddress


class InstrumentNotFound(LookupError):
    """No instrument (or more than one) answers to a symbol."""


def tick_addresses(feed_names: list[str]) -> dict[tuple[str, str], TickAddress]:
    """Map (feed, venue symbol) to where its ticks are written, for the given feeds."""
    rows = Instrument.objects.filter(feed__name__in=feed_names).values_list(
        "feed__name", "venue_symbol", "pk", "feed_id"
    )
    return {(feed, venue_symbol): TickAddress(pk, feed_id) for feed, venue_symbol, pk, feed_id in rows}


def find_instrument(symbol: str, feed: str | None = None) -> Instrument:
    """Return the one instrument named `symbol` (ours, else the venue's spelling), optionally on `feed`."""
    instruments = Instrument.objects.select_related("feed")
    if feed is not None:
        instruments = instruments.filter(feed__name=feed)
    for match in (Q(symbol=symbol), Q(venue_symbol=symbol)):
        found = list(instruments.filter(match)[:2])
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            feeds = ", ".join(sorted(i.feed.name for i in instruments.filter(match)))
            raise InstrumentNotFound(f"{symbol} is on several feeds ({feeds}); name one with --feed")
    where = f" on feed {feed}" if feed else ""
    raise InstrumentNotFound(f"no instrument {symbol}{where}")


def ticks_in_order(instrument: Instrument, start_ns: int | None = None, end_ns: int | None = None) -> QuerySet[Tick]:
    """Ticks of `instrument` in [start_ns, end_ns), by exchange time then trade id.

    Trade ids are numeric strings on every venue that has them; ordering by
    (length, text) is their numeric order without a cast that SQLite lacks.
    """
    ticks = Tick.objects.filter(instrument=instrument)
    if start_ns is not None:
        ticks = ticks.filter(ts_event__gte=start_ns)
    if end_ns is not None:
        ticks = ticks.filter(ts_event__lt=end_ns)
    return ticks.annotate(trade_id_len=Length("trade_id")).order_by("ts_event", "trade_id_len", "trade_id", "pk")


def iter_tick_values(
    ticks: QuerySet[Tick], *, chunk_size: int = 10_000
) -> Iterator[tuple[int, int, int, int | None, str, str, int]]:
    """Yield (ts_event, price, volume, duration_since_last_ns, trade_id, side, ts_recv) without loading all rows."""
    return ticks.values_list(
        "ts_event", "price", "volume", "duration_since_last_ns", "trade_id", "side", "ts_recv"
    ).iterator(chunk_size=chunk_size)
