"""The long commands' progress bar: drawn on a terminal, silent elsewhere, moved by what the command did."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from core.progress import progress_bar
from tests.backtesting.test_tick_tape import random_csv


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_draws_on_a_terminal_only() -> None:
    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        with progress_bar("job", total=10, stream=stream, unit_bytes=False, every=1) as advance:
            for _ in range(10):
                advance(1)
    assert "job" in screen.getvalue() and pipe.getvalue() == ""


def test_a_total_given_as_a_function_is_counted_only_for_a_bar_that_draws() -> None:
    counted: list[str] = []
    for name, stream in (("pipe", io.StringIO()), ("terminal", Terminal())):
        with progress_bar("job", total=lambda name=name: counted.append(name) or 5, stream=stream) as advance:
            advance(5)
    assert counted == ["terminal"]


def test_a_disabled_bar_draws_nothing_even_on_a_terminal() -> None:
    screen = Terminal()
    with progress_bar("job", total=3, stream=screen, enabled=False) as advance:
        advance(3)
    assert screen.getvalue() == ""


@pytest.mark.parametrize(
    "extra",
    [(), ("--signals-only",), ("--report", "json")],
)
def test_the_backtest_command_moves_its_bar_over_the_replayed_ticks(tmp_path: Path, monkeypatch, extra) -> None:
    from backtesting.management.commands import backtest as command

    moved: list[tuple[int, int]] = []

    class Recording:
        def __init__(self, label: str, *, total: Any, enabled: bool = True, **options: object) -> None:
            self.total, self.enabled = (total() if callable(total) else total), enabled

        def __enter__(self):
            return lambda n: moved.append((self.total, n))

        def __exit__(self, *exc: object) -> None:
            moved.append((self.total, -1 if self.enabled else -2))

    monkeypatch.setattr(command, "progress_bar", Recording)
    path = random_csv(tmp_path / "t.csv", seed=2, count=1_000, symbols=("BTC", "ETH"))
    params = '{"timeframe_s": 5, "fast": 2, "slow": 5}'
    out = io.StringIO()
    call_command("backtest", "--strategy", "ema", "--params", params, "--ticks", str(path), *extra, stdout=out)
    assert moved[-1] == (1_000, -1 if extra == () else -2)  # a tape (--report, --signals-only) shows no bar
    if extra == ():
        assert sum(n for _, n in moved[:-1]) == 1_000  # every replayed tick, the header not counted
    moved.clear()
    call_command(
        "backtest", "--strategy", "ema", "--params", params, "--ticks", str(path), "--no-progress", *extra, stdout=out
    )
    assert moved[-1][1] == -2


def test_the_sweep_command_moves_its_bar_per_point(tmp_path: Path, monkeypatch) -> None:
    from backtesting.management.commands import backtestsweep as command

    moved: list[int] = []
    totals: list[int] = []

    class Recording:
        def __init__(self, label: str, *, total: int, **options: object) -> None:
            totals.append(total)

        def __enter__(self):
            return moved.append

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(command, "progress_bar", Recording)
    path = random_csv(tmp_path / "t.csv", seed=2, count=500, symbols=("BTC",))
    grid = '{"fast": [2, 3], "slow": [5, 8]}'
    call_command(
        "backtestsweep", "--strategy", "ema", "--grid", grid, "--params", '{"timeframe_s": 5}',
        "--ticks", str(path), "--workers", "1", stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip
    assert totals == [4] and moved == [1, 1, 1, 1]
