"""Rebuild the minute candle rollup from the recorded ticks (after a restore or a bulk import)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Max, Min

from feeds.management.commands.exportticks import parse_instant_ns
from feeds.models import Instrument, Tick
from feeds.recording.minute_candles import recompute_minutes
from feeds.recording.tick_selectors import InstrumentNotFound, find_instrument

# One transaction (and one hold of the tick table against writers) per day of ticks.
CHUNK_NS = 86_400 * 1_000_000_000


class Command(BaseCommand):
    help = "Recompute the minute candles of recorded ticks (all instruments, or one) from the ticks themselves."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--symbol", help="Only this symbol (ours or the venue's); default every instrument.")
        parser.add_argument("--feed", help="The feed, when the symbol is on several.")
        parser.add_argument("--from", dest="start", help="First exchange time to rebuild (ISO 8601, UTC).")
        parser.add_argument("--to", dest="end", help="Exchange time to stop before (ISO 8601, UTC).")

    def handle(
        self, *args: Any, symbol: str | None, feed: str | None, start: str | None, end: str | None, **options: Any
    ) -> None:
        if symbol:
            try:
                instruments = [find_instrument(symbol, feed)]
            except InstrumentNotFound as exc:
                raise CommandError(str(exc)) from None
        else:
            instruments = list(
                Instrument.objects.select_related("feed")
                .filter(**({"feed__name": feed} if feed else {}))
                .order_by("pk")
            )
        start_ns = parse_instant_ns(start) if start else None
        end_ns = parse_instant_ns(end) if end else None
        if start_ns is not None and end_ns is not None and end_ns <= start_ns:
            raise CommandError("--to is not after --from")
        for instrument in instruments:
            span = Tick.objects.filter(instrument=instrument).aggregate(first=Min("ts_event"), last=Max("ts_event"))
            if span["first"] is None:
                continue
            low = span["first"] if start_ns is None else max(start_ns, span["first"])
            high = span["last"] + 1 if end_ns is None else min(end_ns, span["last"] + 1)
            candles = 0
            for chunk in range(low, high, CHUNK_NS):
                candles += recompute_minutes(
                    instrument_id=instrument.pk, start_ns=chunk, end_ns=min(chunk + CHUNK_NS, high)
                )
            self.stdout.write(f"backfill_candles: {instrument.feed.name} {instrument.symbol}: {candles} minute candles")
