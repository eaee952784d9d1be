"""Import a venue's public bulk trade history: into the tick CSV, or as a feed's recorded ticks."""

from __future__ import annotations

import csv
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from core.fixed_point import fixed_to_str
from core.fixed_point_field import max_abs_for
from core.progress import progress_bar
from feeds.market import MarketData
from feeds.models import Instrument, Tick
from feeds.recording.tick_selectors import InstrumentNotFound, find_instrument
from feeds.venues.base import ParseError
from feeds.venues.binance_archive import is_header, parse_agg_trade_row
from feeds.venues.tick_csv import HEADER

FORMATS = ("binance-aggtrades",)
CHUNK = 5_000
SHOW_REFUSED = 5  # the first refused rows are named with their file and line; the rest counted


def archive_lines(path: Path) -> Iterator[tuple[str, int, bytes]]:
    """Yield (member, line number, line) of a CSV file or of every CSV inside a zip archive."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in sorted(name for name in archive.namelist() if name.lower().endswith(".csv")):
                with archive.open(member) as stream:
                    yield from _lines(f"{path.name}:{member}", stream)
        return
    with path.open("rb") as stream:
        yield from _lines(path.name, stream)


def _lines(name: str, stream: IO[bytes]) -> Iterator[tuple[str, int, bytes]]:
    for number, line in enumerate(stream, start=1):
        line = line.rstrip(b"\r\n")
        if line and not (number == 1 and is_header(line)):
            yield name, number, line


class Command(BaseCommand):
    help = (
        "Import Binance aggTrades archives (data.binance.vision daily or monthly zip files, or their CSV) "
        "as a tick CSV (--output) or as recorded ticks of a feed's instrument (--feed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, help="Archive zip or CSV files, in time order.")
        parser.add_argument("--format", default="binance-aggtrades", choices=FORMATS)
        parser.add_argument("--symbol", required=True, help="Our symbol (BTC-USDT) or, with --feed, the venue's.")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--output", "-o", help="Write a tick CSV (docs/tick-csv.md) to this file.")
        target.add_argument("--feed", help="Record the trades as ticks of this feed's instrument.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar on standard error.")

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[Path] = options["files"]
        for path in files:
            if not path.is_file():
                raise CommandError(f"no such file: {path}")
        refused: Counter[str] = Counter()
        show = not options["no_progress"]
        if options["output"]:
            written, skipped = self._to_csv(files, options["symbol"], Path(options["output"]), refused, show)
            where = options["output"]
        else:
            try:
                instrument = find_instrument(options["symbol"], options["feed"])
            except InstrumentNotFound as exc:
                raise CommandError(str(exc)) from None
            written, skipped = self._to_database(files, instrument, refused, show)
            where = f"feed {instrument.feed.name}, instrument {instrument.symbol}"
        summary = f"importticks: {written} trades imported into {where}"
        if skipped:
            summary += f", {skipped} already recorded (skipped)"
        if refused:
            reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(refused.items()))
            summary += f"; {sum(refused.values())} rows refused ({reasons})"
        self.stderr.write(summary)

    def _trades(self, files: list[Path], symbol: str, refused: Counter[str], show: bool) -> Iterator[MarketData]:
        received_ns = time.time_ns()
        total = sum(path.stat().st_size for path in files)
        with progress_bar("importticks", total=total, enabled=show) as advance:
            for path in files:
                for name, number, line in archive_lines(path):
                    advance(len(line) + 1)
                    try:
                        yield parse_agg_trade_row(line, symbol, received_ns)
                    except ParseError as exc:
                        refused[exc.reason] += 1
                        if sum(refused.values()) <= SHOW_REFUSED:
                            self.stderr.write(f"importticks: {name}: line {number}: refused ({exc.reason}): {exc}")

    def _to_csv(
        self, files: list[Path], symbol: str, output: Path, refused: Counter[str], show: bool
    ) -> tuple[int, int]:
        count = 0
        with output.open("w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream, lineterminator="\n")
            writer.writerow([*HEADER.split(","), "trade_id", "side", "ts_ns"])
            for trade in self._trades(files, symbol, refused, show):
                side = trade.side.value if trade.side else ""
                writer.writerow(
                    (
                        trade.ts_event // 1_000_000,
                        symbol,
                        fixed_to_str(trade.price),
                        fixed_to_str(trade.volume),
                        trade.trade_id,
                        side,
                        trade.ts_event,
                    )
                )
                count += 1
        return count, 0

    def _to_database(
        self, files: list[Path], instrument: Instrument, refused: Counter[str], show: bool
    ) -> tuple[int, int]:
        written = skipped = 0
        previous_ns: int | None = None
        chunk: list[Tick] = []
        limit = max_abs_for(connection)
        for trade in self._trades(files, instrument.symbol, refused, show):
            if trade.price > limit or trade.volume > limit:
                # Exact or not at all: SQLite's 64-bit column holds less than a parse accepts.
                refused["storage_range"] += 1
                self.stderr.write(
                    f"importticks: trade {trade.trade_id}: refused (storage_range): beyond what "
                    f"{connection.vendor} stores exactly (|value| <= {fixed_to_str(limit)})"
                )
                continue
            chunk.append(
                Tick(
                    instrument=instrument,
                    ts_event=trade.ts_event,
                    ts_recv=trade.ts_recv,
                    price=trade.price,
                    volume=trade.volume,
                    duration_since_last_ns=None if previous_ns is None else max(0, trade.ts_event - previous_ns),
                    trade_id=trade.trade_id or "",
                    side=trade.side.value if trade.side else "",
                )
            )
            previous_ns = trade.ts_event
            if len(chunk) >= CHUNK:
                added = _insert_new(instrument, chunk)
                written, skipped, chunk = written + added, skipped + len(chunk) - added, []
        if chunk:
            added = _insert_new(instrument, chunk)
            written, skipped = written + added, skipped + len(chunk) - added
        return written, skipped


def _insert_new(instrument: Instrument, chunk: list[Tick]) -> int:
    """Insert the chunk's ticks not recorded yet (same instrument and trade id); return how many."""
    with transaction.atomic():
        ids = [tick.trade_id for tick in chunk]
        known = set(Tick.objects.filter(instrument=instrument, trade_id__in=ids).values_list("trade_id", flat=True))
        fresh = [tick for tick in chunk if tick.trade_id not in known]
        # A concurrent recorder may add one of them meanwhile: the unique index keeps it once.
        Tick.objects.bulk_create(fresh, ignore_conflicts=True)
    return len(fresh)
