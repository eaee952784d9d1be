"""Write recorded ticks as CSV (`ts_ms,symbol,price,volume`), the format `backtest` reads."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.fixed_point import fixed_to_str
from feeds.recording.tick_selectors import InstrumentNotFound, find_instrument, iter_tick_values, ticks_in_order
from feeds.venues.tick_csv import HEADER


def parse_instant_ns(text: str) -> int:
    """Return an ISO 8601 date or date-time as UTC ns; a time without an offset is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"not an ISO 8601 date or time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


class Command(BaseCommand):
    help = "Export recorded ticks of one symbol as CSV: ts_ms,symbol,price,volume (exact decimals)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--symbol", required=True, help="Our symbol (BTC-USDT) or the venue's (BTCUSDT).")
        parser.add_argument("--feed", help="The feed, when the symbol is on several.")
        parser.add_argument("--from", dest="start", help="First exchange time to include (ISO 8601, UTC).")
        parser.add_argument("--to", dest="end", help="Exchange time to stop before (ISO 8601, UTC).")
        parser.add_argument("--output", "-o", help="Write to this file instead of standard output.")

    def handle(
        self,
        *args: Any,
        symbol: str,
        feed: str | None,
        start: str | None,
        end: str | None,
        output: str | None,
        **options: Any,
    ) -> None:
        start_ns = parse_instant_ns(start) if start else None
        end_ns = parse_instant_ns(end) if end else None
        if start_ns is not None and end_ns is not None and end_ns < start_ns:
            raise CommandError("--to is before --from")
        try:
            instrument = find_instrument(symbol, feed)
        except InstrumentNotFound as exc:
            raise CommandError(str(exc)) from None
        if output:
            with open(output, "w", newline="", encoding="utf-8") as stream:
                count = self._write(stream, instrument.symbol, instrument, start_ns, end_ns)
            self.stderr.write(f"exportticks: {count} ticks of {instrument.symbol} written to {output}")
        else:
            self._write(self.stdout, instrument.symbol, instrument, start_ns, end_ns)

    def _write(self, stream: Any, name: str, instrument: Any, start_ns: int | None, end_ns: int | None) -> int:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(HEADER.split(","))
        count = 0
        for ts_event, price, volume, *_ in iter_tick_values(ticks_in_order(instrument, start_ns, end_ns)):
            writer.writerow((ts_event // 1_000_000, name, fixed_to_str(price), fixed_to_str(volume)))
            count += 1
        return count
