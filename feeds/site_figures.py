"""Site-wide feed figures read from the recorded ticks: what every runfeed process recorded.

One query over the instruments with two correlated subqueries, each an index range on
tick_instrument_ts (instrument, ts_event): the cost grows with the number of
instruments and the ticks of the window, never with the size of the tick table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from feeds.models import Instrument, Tick

WINDOW_S = 60


@dataclass(frozen=True)
class FeedTickFigures:
    feed: str
    enabled: bool
    instruments: int
    ticks_last_window: int  # ticks with an exchange time in the last WINDOW_S seconds
    last_tick_ns: int | None  # exchange time of the newest recorded tick, UTC ns


def feed_tick_figures(*, now_ns: int | None = None, window_s: int = WINDOW_S) -> list[FeedTickFigures]:
    """Every feed with instruments, by name: ticks of the window and the newest tick's time."""
    since = (time.time_ns() if now_ns is None else now_ns) - window_s * 1_000_000_000
    recent = (
        Tick.objects.filter(instrument=OuterRef("pk"), ts_event__gte=since)
        .order_by()
        .values("instrument")
        .annotate(n=Count("id"))
        .values("n")
    )
    newest = Tick.objects.filter(instrument=OuterRef("pk")).order_by("-ts_event").values("ts_event")[:1]
    rows = (
        Instrument.objects.order_by()
        .annotate(
            recent=Coalesce(Subquery(recent, output_field=IntegerField()), 0),
            newest=Subquery(newest, output_field=IntegerField()),
        )
        .values_list("feed__name", "feed__enabled", "recent", "newest")
    )
    figures: dict[str, FeedTickFigures] = {}
    for feed, enabled, recent_n, newest_ns in rows:
        seen = figures.get(feed)
        last = newest_ns if seen is None else _latest(seen.last_tick_ns, newest_ns)
        figures[feed] = FeedTickFigures(
            feed=feed,
            enabled=bool(enabled),
            instruments=(seen.instruments if seen else 0) + 1,
            ticks_last_window=(seen.ticks_last_window if seen else 0) + int(recent_n),
            last_tick_ns=last,
        )
    return [figures[name] for name in sorted(figures)]


def _latest(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
