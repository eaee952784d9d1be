"""Sweeps: every grid point backtested with fills, over two processes, with the same results as one."""

from __future__ import annotations

import io
import json
import os

import pytest
from django.core.management import CommandError, call_command

from backtesting.simulated_account import SimulatedSettings
from backtesting.sweep import SweepError, grid_points, ranked, run_sweep
from feeds.market import parse_fixed

GRID = {"fast": [2, 3, 4, 30], "slow": [8, 12]}  # 8 points; fast 30 is refused (not below slow)


def test_grid_points_are_every_combination_in_a_fixed_order() -> None:
    points = grid_points({"timeframe_s": 10}, GRID)
    assert len(points) == 8
    assert points[0] == {"timeframe_s": 10, "fast": 2, "slow": 8}
    assert points[-1] == {"timeframe_s": 10, "fast": 30, "slow": 12}
    for bad in ({}, {"fast": []}, {"fast": 3}, []):
        with pytest.raises(SweepError):
            grid_points({}, bad)  # type: ignore[arg-type]


def test_eight_points_over_two_processes_equal_one_process(walk) -> None:
    settings = SimulatedSettings(capital=parse_fixed("10000"), quantity=parse_fixed("1"))
    points = grid_points({"timeframe_s": 10}, GRID)
    parallel = run_sweep(kind="ema", points=points, ticks=walk, settings=settings, workers=2)
    serial = run_sweep(kind="ema", points=points, ticks=walk, settings=settings, workers=1)
    assert parallel == serial
    assert [r.index for r in parallel] == list(range(8))
    refused = [r for r in parallel if r.refused]
    assert [r.params["fast"] for r in refused] == [30, 30] and "greater than fast" in refused[0].refused
    traded = [r for r in parallel if not r.refused]
    assert all(r.figures["trades"] > 0 for r in traded)
    best = ranked(parallel, "pnl")
    pnls = [r.figures["pnl"] for r in best if not r.refused]
    assert pnls == sorted(pnls, reverse=True) and best[-1].refused
    lowest_drawdown = ranked(parallel, "max_drawdown")[0]
    assert lowest_drawdown.figures["max_drawdown"] == min(r.figures["max_drawdown"] for r in traded)


@pytest.mark.django_db
def test_the_command_prints_the_table_and_json(walk) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = [
        "--strategy",
        "ema",
        "--params",
        '{"timeframe_s": 10}',
        "--grid",
        '{"fast": [2, 3], "slow": [8]}',
        "--ticks",
        walk,
    ]
    call_command("backtestsweep", *args, "--workers", "1", "--json", "--metric", "sharpe", stdout=out, stderr=err)
    rows = json.loads(out.getvalue())
    assert len(rows) == 2 and {r["params"]["fast"] for r in rows} == {2, 3}
    assert isinstance(rows[0]["pnl"], str)  # money as exact decimal strings
    assert "2 points (0 refused) on 1 processes" in err.getvalue()
    table = io.StringIO()
    call_command("backtestsweep", *args, "--workers", "1", "--top", "1", stdout=table, stderr=io.StringIO())
    assert len(table.getvalue().strip().splitlines()) == 3  # header, rule, the best point
    with pytest.raises(CommandError, match="grid"):
        call_command("backtestsweep", *args[:4], "--grid", "[1]", "--ticks", walk, stdout=io.StringIO())
    with pytest.raises(CommandError, match="no such file"):
        call_command("backtestsweep", *args[:6], "--ticks", "/nonexistent.csv", stdout=io.StringIO())


def worker_state(_: int) -> dict[str, object]:
    """What a sweep worker inherited: run in the worker."""
    import asyncio
    import os
    import sys

    from django.apps import apps
    from django.db import connections

    from backtesting.sweep_worker import worker_setup

    worker_setup()
    return {
        "pid": os.getpid(),
        "apps_ready": apps.ready,
        "open_connections": [c.alias for c in connections.all(initialized_only=True) if c.connection is not None],
        "running_loop": asyncio._get_running_loop() is not None,
        "preloaded": "backtesting.runner" in sys.modules and "backtesting.sweep_preload" in sys.modules,
    }


@pytest.mark.django_db
def test_workers_start_warm_from_the_fork_server_and_share_no_connection_or_loop() -> None:
    from concurrent.futures import ProcessPoolExecutor

    from django.db import connection

    from backtesting.sweep import _worker_context

    connection.ensure_connection()  # the parent holds a connection: no worker may inherit it
    context = _worker_context()
    assert context.get_start_method() == "forkserver"
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        states = list(pool.map(worker_state, range(2)))
    for state in states:
        assert state["pid"] != os.getpid()
        assert state["apps_ready"] and state["preloaded"]
        assert state["open_connections"] == [] and not state["running_loop"]
