"""`manage.py backtestsweep`: a backtest with fills for every point of a parameter grid, or for the
points an optimizer proposes (`--optimize`), over the cores."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backtesting.sweep import METRICS, SweepError, SweepResult, grid_points, ranked, run_sweep
from backtesting.sweep_optimize import DEFAULT_BATCH, optimize
from backtesting.trading_options import add_trading_arguments, json_object, simulated_settings
from core.fixed_point import fixed_to_str
from core.progress import progress_bar
from processor.strategies import STRATEGIES

_MONEY = ("pnl", "fees")


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name in _MONEY:
        return fixed_to_str(value)
    if name in ("win_rate", "max_drawdown", "pnl_pct"):
        return f"{value * 100:.2f}%"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


class Command(BaseCommand):
    help = (
        "Backtest every point of a parameter grid, or the points an optimizer proposes, "
        "(with fills and money) over several processes; best first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--strategy", required=True, help=f"strategy kind: {', '.join(sorted(STRATEGIES))}")
        parser.add_argument("--params", default="{}", help="JSON object: the parameters the grid does not vary")
        parser.add_argument("--grid", help='JSON object of lists, e.g. \'{"fast":[5,8],"slow":[20,30]}\'')
        parser.add_argument(
            "--optimize",
            type=int,
            metavar="TRIALS",
            help="instead of a grid: let Optuna's TPE sampler propose TRIALS points over --space, steered by --metric",
        )
        parser.add_argument(
            "--space",
            help='with --optimize: JSON object of ranges or choices, e.g. \'{"fast":{"low":2,"high":20},"slow":[20,30,50]}\'',
        )
        parser.add_argument("--seed", type=int, default=0, help="with --optimize: the sampler's seed")
        parser.add_argument(
            "--batch",
            type=int,
            default=DEFAULT_BATCH,
            help="with --optimize: points asked for and backtested together (the same seed and batch give the same trials)",
        )
        parser.add_argument("--ticks", required=True, help="tick CSV file (docs/tick-csv.md)")
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: the cores)")
        parser.add_argument("--metric", default="pnl", choices=list(METRICS), help="sort by this figure")
        parser.add_argument("--top", type=int, default=0, help="print only the best N points (0: all)")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
        add_trading_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        kind = options["strategy"]
        if kind not in STRATEGIES:
            raise CommandError(f"unknown strategy kind {kind!r}; known: {', '.join(sorted(STRATEGIES))}")
        base = json_object(options["params"], "--params")
        if (options["grid"] is None) == (options["optimize"] is None):
            raise CommandError("give either --grid, or --optimize TRIALS with --space")
        if options["optimize"] is not None and options["space"] is None:
            raise CommandError("--optimize needs --space")
        if not isinstance(base, dict):
            raise CommandError("--params must be a JSON object")
        if not Path(options["ticks"]).is_file():
            raise CommandError(f"no such file: {options['ticks']}")
        if not 1 <= options["workers"] <= 256:
            raise CommandError("--workers must be from 1 to 256")
        settings = simulated_settings(options)
        started = time.perf_counter()
        show = not options["no_progress"]
        try:
            if options["optimize"] is not None:
                with progress_bar(
                    "backtestsweep trials", total=options["optimize"], enabled=show, unit_bytes=False, every=1
                ) as advance:
                    results = optimize(
                        kind=kind,
                        base=base,
                        space=json_object(options["space"], "--space"),
                        trials=options["optimize"],
                        metric=options["metric"],
                        ticks=options["ticks"],
                        settings=settings,
                        workers=options["workers"],
                        seed=options["seed"],
                        batch=options["batch"],
                        on_result=lambda result: advance(1),
                    )
            else:
                points = grid_points(base, json_object(options["grid"], "--grid"))
                with progress_bar(
                    "backtestsweep points", total=len(points), enabled=show, unit_bytes=False, every=1
                ) as advance:
                    results = run_sweep(
                        kind=kind,
                        points=points,
                        ticks=options["ticks"],
                        settings=settings,
                        workers=options["workers"],
                        on_result=lambda result: advance(1),
                    )
        except SweepError as exc:
            raise CommandError(str(exc)) from None
        seconds = time.perf_counter() - started
        best = ranked(results, options["metric"])
        if options["top"] > 0:
            best = best[: options["top"]]
        if options["json"]:
            self.stdout.write(json.dumps([_as_json(result) for result in best], indent=2))
        else:
            self.stdout.write(_table(best))
        refused = sum(1 for result in results if result.refused)
        self.stderr.write(
            f"backtestsweep {kind}: {len(results)} points ({refused} refused) on {options['workers']} processes "
            f"in {seconds:.2f}s, sorted by {options['metric']}"
        )


def _as_json(result: SweepResult) -> dict[str, Any]:
    figures = {name: fixed_to_str(v) if name in _MONEY and v is not None else v for name, v in result.figures.items()}
    return {"index": result.index, "params": result.params, "refused": result.refused, **figures}


def _table(results: list[SweepResult]) -> str:
    columns = ("trades", "pnl", "pnl_pct", "fees", "win_rate", "profit_factor", "max_drawdown", "sharpe", "calmar")
    header = ("#", "params", *columns, "note")
    rows = []
    for result in results:
        params = json.dumps(result.params, sort_keys=True, separators=(",", ":"))
        if result.refused:
            rows.append((str(result.index), params, *[""] * len(columns), f"refused: {result.refused}"))
        else:
            rows.append((str(result.index), params, *(_cell(c, result.figures.get(c)) for c in columns), ""))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i < 2 or i == len(header) - 1 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
