"""Optimizer sweeps: Optuna proposes the points, each backtested with fills; the same on one process or two."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from backtesting.simulated_account import SimulatedSettings
from backtesting.sweep import SweepError, ranked, run_sweep
from backtesting.sweep_optimize import optimize, search_space
from feeds.market import parse_fixed

SPACE = {"fast": {"low": 2, "high": 12}, "slow": [8, 12, 20]}  # fast >= slow is refused by ema
SETTINGS = SimulatedSettings(capital=parse_fixed("10000"), quantity=parse_fixed("1"))


def test_the_search_space_takes_ranges_and_choices_and_names_a_bad_entry() -> None:
    space = search_space({"fast": {"low": 2, "high": 12, "step": 2}, "slow": [8, 12], "k": {"low": 0.5, "high": 2.0}})
    assert list(space) == ["fast", "k", "slow"]
    assert type(space["fast"]).__name__ == "IntDistribution" and space["fast"].step == 2
    assert type(space["k"]).__name__ == "FloatDistribution"
    for bad, named in [
        ({}, "search space"),
        ([], "search space"),
        ({"fast": []}, "'fast'"),
        ({"fast": {"low": 5}}, "'fast'"),
        ({"fast": {"low": 5, "high": 2}}, "above high"),
        ({"fast": {"low": "a", "high": 2}}, "numbers"),
        ({"fast": {"low": 1, "high": 9, "step": 0}}, "step"),
        ({"fast": {"low": 0, "high": 9, "log": True}}, "log"),
        ({"fast": {"low": 1, "high": 9, "extra": 1}}, "'fast'"),
        ({"fast": [{"nested": 1}]}, "choices"),
    ]:
        with pytest.raises(SweepError, match=named):
            search_space(bad)


def test_eight_trials_over_two_processes_equal_one_process_and_follow_the_seed(walk) -> None:
    run = dict(kind="ema", base={"timeframe_s": 10}, space=SPACE, trials=8, metric="pnl", ticks=walk, settings=SETTINGS)
    parallel = optimize(**run, workers=2, seed=3, batch=4)
    serial = optimize(**run, workers=1, seed=3, batch=4)
    assert parallel == serial
    assert [r.index for r in parallel] == list(range(8))
    assert all(2 <= r.params["fast"] <= 12 and r.params["slow"] in (8, 12, 20) for r in parallel)
    # Each trial is the very backtest a grid point with its parameters is.
    grid = run_sweep(kind="ema", points=[r.params for r in parallel], ticks=walk, settings=SETTINGS, workers=1)
    assert [(r.refused, r.figures) for r in grid] == [(r.refused, r.figures) for r in parallel]
    refused = [r for r in parallel if r.refused]
    assert all(r.params["fast"] >= r.params["slow"] and "greater than fast" in r.refused for r in refused)
    best = ranked(parallel, "pnl")
    pnls = [r.figures["pnl"] for r in best if not r.refused]
    assert pnls == sorted(pnls, reverse=True)
    another_seed = optimize(**run, workers=1, seed=4, batch=4)
    assert [r.params for r in another_seed] != [r.params for r in serial]


def test_a_point_asked_twice_is_backtested_once(walk, monkeypatch) -> None:
    from backtesting import sweep

    calls = []
    real = sweep.run_point

    def counted(kind, index, params, ticks, settings):  # type: ignore[no-untyped-def]
        calls.append(params)
        return real(kind, index, params, ticks, settings)

    monkeypatch.setattr(sweep, "run_point", counted)
    results = optimize(
        kind="ema",
        base={"timeframe_s": 10},
        space={"fast": [2, 3], "slow": [8]},  # two points only, six trials
        trials=6,
        metric="pnl",
        ticks=walk,
        settings=SETTINGS,
        workers=1,
        batch=2,
    )
    assert len(results) == 6
    assert sorted(json.dumps(p, sort_keys=True) for p in calls) == sorted(
        {json.dumps(r.params, sort_keys=True) for r in results}
    )


@pytest.mark.django_db
def test_the_command_optimizes_and_refuses_bad_input_by_name(walk) -> None:
    out, err = io.StringIO(), io.StringIO()
    common = ["--strategy", "ema", "--params", '{"timeframe_s": 10}', "--ticks", walk, "--workers", "1"]
    call_command(
        "backtestsweep",
        *common,
        "--optimize",
        "5",
        "--space",
        json.dumps(SPACE),
        "--metric",
        "max_drawdown",
        "--json",
        stdout=out,
        stderr=err,
    )
    rows = json.loads(out.getvalue())
    assert len(rows) == 5 and "5 points" in err.getvalue() and "sorted by max_drawdown" in err.getvalue()
    drawdowns = [r["max_drawdown"] for r in rows if not r["refused"]]
    assert drawdowns == sorted(drawdowns)
    for extra, message in [
        ([], "either --grid"),
        (["--grid", '{"fast":[2]}', "--optimize", "3", "--space", "{}"], "either --grid"),
        (["--optimize", "3"], "needs --space"),
        (["--optimize", "3", "--space", "{nope"], "--space is not JSON"),
        (["--optimize", "3", "--space", '{"fast": {"low": 9, "high": 2}}'], "above high"),
        (["--optimize", "0", "--space", json.dumps(SPACE)], "trials must be"),
        (["--optimize", "3", "--space", json.dumps(SPACE), "--batch", "0"], "batch must be"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("backtestsweep", *common, *extra, stdout=io.StringIO(), stderr=io.StringIO())
