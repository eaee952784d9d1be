"""Ticks recorded straight into the e2e site's database (run in a subprocess, like site_setup)."""

from __future__ import annotations

import json

from feeds.market import parse_fixed
from feeds.models import Instrument, Tick


def record_ticks(feed: str, symbol: str, ticks_json: str) -> None:
    """Store [[ts_ms, price, volume, trade_id], ...] as recorded trades of one instrument."""
    instrument = Instrument.objects.get(feed__name=feed, symbol=symbol)
    rows = json.loads(ticks_json)
    Tick.objects.bulk_create(
        Tick(
            instrument=instrument,
            ts_event=ts_ms * 1_000_000,
            ts_recv=ts_ms * 1_000_000,
            price=parse_fixed(price),
            volume=parse_fixed(volume),
            trade_id=trade_id,
        )
        for ts_ms, price, volume, trade_id in rows
    )
    print(json.dumps({"instrument": instrument.pk, "recorded": len(rows)}))
