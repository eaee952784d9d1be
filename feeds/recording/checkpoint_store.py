"""The persisted side of the checkpoint: load it at start, and record known holes.

The live checkpoint belongs to the consistency layer; the recorder writes its copy
(feeds.models.StreamCheckpoint) with the ticks. A starting stream seeds its
consistency state from these rows so a restarted process recovers its gap too.
"""

from __future__ import annotations

from feeds.market import MarketData, Side
from feeds.models import Feed, KnownHole, StreamCheckpoint

_SIDES = {"buy": Side.BUY, "sell": Side.SELL}


def load_checkpoints(feed_name: str) -> dict[str, MarketData]:
    """Return the persisted checkpoint of each venue symbol of `feed_name`, as trades."""
    rows = StreamCheckpoint.objects.filter(feed__name=feed_name)
    return {
        row.venue_symbol: MarketData(
            symbol=row.venue_symbol,
            price=row.price,
            volume=row.volume,
            ts_event=row.ts_event,
            ts_recv=row.ts_event,
            trade_id=row.trade_id or None,
            side=_SIDES.get(row.side),
        )
        for row in rows
    }


def record_known_hole(feed_name: str, venue_symbol: str, start_ns: int, end_ns: int, reason: str) -> KnownHole:
    """Write down trades that cannot be recovered, with their bounds."""
    feed = Feed.objects.get(name=feed_name)
    return KnownHole.objects.create(
        feed=feed, venue_symbol=venue_symbol, start_ns=start_ns, end_ns=end_ns, reason=reason[:200]
    )
