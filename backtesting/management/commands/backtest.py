"""`manage.py backtest`: replay ticks through the live strategy code.

Without `--report`: JSON lines of outputs and signals on stdout. With `--report text` or
`--report json`: the signals are traded by a simulated account (the executor's rules,
the paper exchange's fills and fees, exact ledger arithmetic) and the report is printed.
A CSV file with `--report` or `--signals-only` is read as a tick tape (columns), with the
replay's results.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backtesting.runner import run_filled_backtest, run_filled_tape
from backtesting.simulated_account import risk_events_as_json
from backtesting.tape_replay import run_tape_backtest
from backtesting.tick_sources import TickSourceError, read_in_thread, recorded_batches, recorded_tick_count
from backtesting.tick_tape import TickTape, read_tick_tape
from backtesting.trading_options import add_trading_arguments, cleaned_params, json_object, simulated_settings
from core.fixed_point import fixed_to_str
from core.progress import progress_bar
from feeds.market import FeedData
from feeds.venues.tick_csv import TickFileError, read_tick_csv
from processor.backtest import BACKTEST_FEED, BacktestError, JsonLinesWriter, run_backtest
from processor.backtest_report import report_as_json, report_as_text
from processor.strategies import STRATEGIES

_RISK_LINES = 50  # risk events printed in the text report
_BATCH_TICKS = 256


def _parse_time(text: str, option: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{option}: not an ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _recorded_batches(
    feed: str, symbols: list[str], start_ns: int, end_ns: int, batch_ticks: int
) -> Iterator[FeedData]:
    # Read in a thread: the replay iterates inside an event loop, where the ORM refuses to run.
    try:
        yield from read_in_thread(lambda: recorded_batches(feed, symbols, start_ns, end_ns, batch_ticks))
    except TickSourceError as exc:
        raise CommandError(str(exc)) from None


def _data_lines(path: str) -> int:
    """The lines of a file after its header (an unreadable file: 0, and the reader says why)."""
    try:
        with open(path, "rb") as stream:
            return max(0, sum(block.count(b"\n") for block in iter(lambda: stream.read(1 << 20), b"")) - 1)
    except OSError:
        return 0


def _advancing(batches: Iterator[FeedData], advance: Callable[[int], None]) -> Iterator[FeedData]:
    for batch in batches:
        advance(len(batch.events))
        yield batch


class Command(BaseCommand):
    help = (
        "Run one strategy over ticks from a CSV file (ts_ms,symbol,price,volume) or over recorded "
        "ticks, through the live processor code. Writes JSON lines to stdout, a summary to stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--strategy", required=True, help=f"strategy kind: {', '.join(sorted(STRATEGIES))}")
        parser.add_argument(
            "--params", required=True, help='JSON object, e.g. \'{"timeframe_s":60,"fast":12,"slow":26}\''
        )
        parser.add_argument("--ticks", help="CSV file with header ts_ms,symbol,price,volume")
        parser.add_argument("--from", dest="start", help="recorded ticks from this ISO time (UTC when no offset)")
        parser.add_argument("--to", dest="end", help="recorded ticks until this ISO time (exclusive)")
        parser.add_argument("--feed", help="feed of the recorded ticks (with --from/--to)")
        parser.add_argument("--symbol", help="comma-separated symbols of the recorded ticks (with --from/--to)")
        parser.add_argument("--signals-only", action="store_true", help="write only the signal lines")
        parser.add_argument("--batch-ticks", type=int, default=_BATCH_TICKS, help="ticks per replayed batch (1..1024)")
        parser.add_argument(
            "--report", choices=("text", "json"), help="trade the signals and print the report instead of the lines"
        )
        parser.add_argument("--json", action="store_true", help="trade the signals and print the report as JSON")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
        add_trading_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["json"]:  # the short form of --report json
            if options["report"] not in (None, "json"):
                raise CommandError("--json prints the report as JSON: give it without --report text")
            options["report"] = "json"
        kind = options["strategy"]
        params = cleaned_params(kind, json_object(options["params"], "--params"))
        batch_ticks = options["batch_ticks"]
        if not 1 <= batch_ticks <= 1024:
            raise CommandError("--batch-ticks must be from 1 to 1024")
        # A CSV file with the report, or with signal lines only in the default batches, is
        # read as a tape: the kind's column folds, the same results as the replay, several
        # times faster. Signal lines of several symbols whose times go backwards are still
        # replayed (from the tape's ticks): their order depends on where the batches fall.
        if options["ticks"] and (options["start"] or options["end"]):
            raise CommandError("give either --ticks or --from/--to, not both")
        as_tape = options["report"] or (options["signals_only"] and batch_ticks == _BATCH_TICKS)
        reading = time.perf_counter()
        tape = self._tape(options) if options["ticks"] and as_tape else None
        # A tape's read is part of the run a user waits for; the summary's time counts it.
        self._read_s = time.perf_counter() - reading if tape is not None else 0.0
        total: int | Callable[[], int]
        if tape is not None and not options["report"] and len(tape.symbols) > 1 and not tape.in_time_order():
            batches: Iterator[FeedData] = tape.batches(batch_ticks)
            total, tape = len(tape), None
        elif tape is not None:
            batches, total = iter(()), len(tape)
        else:
            batches, total = self._batches(options, batch_ticks)
        # A bar over the replayed ticks; a tape is read and folded whole, a million ticks a second or more.
        show = not options["no_progress"] and tape is None
        with progress_bar(f"backtest {kind}", total=total, enabled=show, unit_bytes=False) as advance:
            batches = _advancing(batches, advance)
            if options["report"]:
                self._report(kind, params, batches, options, tape)
            else:
                self._lines(kind, params, batches, options, tape)

    def _lines(
        self,
        kind: str,
        params: dict[str, Any],
        batches: Iterator[FeedData],
        options: dict[str, Any],
        tape: TickTape | None,
    ) -> None:
        writer = JsonLinesWriter(self.stdout._out.write, kind=kind, signals_only=options["signals_only"])  # type: ignore[attr-defined]
        try:
            if tape is not None:
                summary = run_tape_backtest(kind=kind, params=params, tape=tape, writer=writer)
            else:
                summary = asyncio.run(run_backtest(kind=kind, params=params, batches=batches, writer=writer))
        except (TickFileError, BacktestError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.flush()
        self.stderr.write(
            f"backtest {kind}: {summary.ticks} ticks, {summary.symbols} symbols, {summary.outputs} outputs, "
            f"{summary.signals} signals in {self._timing(summary.ticks, summary.seconds)}"
        )

    def _batches(self, options: dict[str, Any], batch_ticks: int) -> tuple[Iterator[FeedData], Callable[[], int]]:
        """The replayed batches, and how to count their ticks (for a progress bar only: a CSV's lines)."""
        if options["ticks"]:
            path = options["ticks"]
            return read_tick_csv(path, feed=BACKTEST_FEED, batch_ticks=batch_ticks), lambda: _data_lines(path)
        if not (options["start"] and options["end"] and options["feed"] and options["symbol"]):
            raise CommandError("give --ticks FILE, or --from, --to, --feed and --symbol for recorded ticks")
        start_ns = _parse_time(options["start"], "--from")
        end_ns = _parse_time(options["end"], "--to")
        if end_ns <= start_ns:
            raise CommandError("--to must be after --from")
        symbols = [symbol.strip() for symbol in options["symbol"].split(",") if symbol.strip()]
        feed = options["feed"]

        def total() -> int:
            try:
                return recorded_tick_count(feed, symbols, start_ns, end_ns)
            except TickSourceError as exc:
                raise CommandError(str(exc)) from None

        return _recorded_batches(feed, symbols, start_ns, end_ns, batch_ticks), total

    def _timing(self, ticks: int, seconds: float) -> str:
        total = seconds + self._read_s
        rate = f"{ticks / total:,.0f} ticks/s" if total > 0 else "no time"
        read = f"; read as a tape in {self._read_s:.3f}s" if self._read_s else ""
        return f"{total:.3f}s ({rate}{read})"

    def _tape(self, options: dict[str, Any]) -> TickTape:
        try:
            return read_tick_tape(options["ticks"], feed=BACKTEST_FEED)
        except TickFileError as exc:
            raise CommandError(str(exc)) from None

    def _report(
        self,
        kind: str,
        params: dict[str, Any],
        batches: Iterator[FeedData],
        options: dict[str, Any],
        tape: TickTape | None,
    ) -> None:
        settings = simulated_settings(options)
        try:
            if tape is not None:
                run = asyncio.run(
                    run_filled_tape(
                        kind=kind, params=params, tape=tape, settings=settings, batch_ticks=options["batch_ticks"]
                    )
                )
            else:
                run = asyncio.run(run_filled_backtest(kind=kind, params=params, batches=batches, settings=settings))
        except (TickFileError, BacktestError) as exc:
            raise CommandError(str(exc)) from None
        if options["report"] == "json":
            data = (
                report_as_json(run.report)
                | {
                    "signals": run.summary.signals,
                    "ticks": run.summary.ticks,
                    "outcomes": dict(sorted(run.account.outcomes.items())),
                }
                | risk_events_as_json(run.account.risk_events)
            )
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write(report_as_text(run.report))
            outcomes = ", ".join(f"{name} {count}" for name, count in sorted(run.account.outcomes.items()))
            self.stdout.write(f"\nSIGNALS\n{run.summary.signals} signals: {outcomes or 'none'}")
            if run.account.risk_events:
                self.stdout.write("\nRISK")
                events = run.account.risk_events
                for event in events[:_RISK_LINES]:
                    at = datetime.fromtimestamp(event.at_ns / 1e9, UTC).isoformat(timespec="milliseconds")
                    self.stdout.write(f"{at}  {event.event:<22} {event.message}")
                if len(events) > _RISK_LINES:
                    self.stdout.write(f"... {len(events) - _RISK_LINES} more (all of them in --report json)")
        self.stderr.write(
            f"backtest {kind}: {run.summary.ticks} ticks, {run.summary.signals} signals, {run.report.trades} trades, "
            f"net {fixed_to_str(run.report.pnl)} in {self._timing(run.summary.ticks, run.summary.seconds)}"
        )
