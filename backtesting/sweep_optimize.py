"""Optimizer sweeps: Optuna's TPE sampler proposes the points, each backtested with fills like a grid point.

A grid tries every combination; an optimizer tries `trials` points, each chosen from
the figures of the ones before, so a wide space costs a fixed number of backtests. The
search space names, per parameter, a range (`{"low": 2, "high": 20}`, with an optional
`step` or `log`) or a list of choices. Points are asked for a round at a time (`batch`
of them) and backtested side by side on the sweep's workers, then told to the sampler in
the order they were asked; with the same seed and batch the trials, and so the results,
are the same on one process or many. A point the strategy refuses, or one whose metric
has no value (a Sharpe ratio under two days), is told as failed and never steers the
sampler. A point asked for twice is backtested once.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from backtesting.simulated_account import SimulatedSettings
from backtesting.sweep import MAX_POINTS, METRICS, PointRunner, SweepError, SweepResult

DEFAULT_BATCH = 8
_RANGE_KEYS = {"low", "high", "step", "log"}

# Optuna logs every trial at INFO; the sweep reports its own progress.
optuna.logging.set_verbosity(logging.WARNING)


def _distribution(name: str, spec: Any) -> BaseDistribution:
    if isinstance(spec, list):
        if not spec or not all(isinstance(v, str | int | float | bool) or v is None for v in spec):
            raise SweepError(f"space {name!r}: a list of choices must be non-empty JSON numbers, strings or booleans")
        return CategoricalDistribution(spec)
    if not isinstance(spec, Mapping) or not {"low", "high"} <= set(spec) or set(spec) - _RANGE_KEYS:
        raise SweepError(f'space {name!r}: give {{"low": L, "high": H}} (optional "step", "log") or a list of choices')
    low, high, step, log = spec["low"], spec["high"], spec.get("step"), spec.get("log", False)
    numbers = [v for v in (low, high, step) if v is not None]
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers) or not isinstance(log, bool):
        raise SweepError(f"space {name!r}: low, high and step must be numbers, log true or false")
    if low > high:
        raise SweepError(f"space {name!r}: low {low} is above high {high}")
    if step is not None and step <= 0:
        raise SweepError(f"space {name!r}: step must be above 0")
    if log and (low <= 0 or step is not None):
        raise SweepError(f"space {name!r}: a log range needs low above 0 and no step")
    try:
        if all(isinstance(v, int) for v in numbers):
            return IntDistribution(low, high, log=log, step=1 if step is None else step)
        return FloatDistribution(float(low), float(high), log=log, step=None if step is None else float(step))
    except ValueError as exc:
        raise SweepError(f"space {name!r}: {exc}") from None


def search_space(space: Any) -> dict[str, BaseDistribution]:
    """The optimizer's distributions for a JSON search space; a bad entry is a SweepError naming it."""
    if not isinstance(space, Mapping) or not space:
        raise SweepError("the search space must be a JSON object of parameter name -> range or list of choices")
    return {name: _distribution(name, space[name]) for name in sorted(space)}


def _point_key(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def optimize(
    *,
    kind: str,
    base: Mapping[str, Any],
    space: Any,
    trials: int,
    metric: str,
    ticks: str,
    settings: SimulatedSettings,
    workers: int,
    seed: int = 0,
    batch: int = DEFAULT_BATCH,
    on_result: Callable[[SweepResult], None] = lambda result: None,
) -> list[SweepResult]:
    """Backtest `trials` points the sampler proposes for `metric`; results in trial order (index = trial number)."""
    if metric not in METRICS:
        raise SweepError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    if not 1 <= trials <= MAX_POINTS:
        raise SweepError(f"trials must be from 1 to {MAX_POINTS}")
    if not 1 <= batch <= 256:
        raise SweepError("batch must be from 1 to 256")
    distributions = search_space(space)
    study = optuna.create_study(
        direction="maximize" if METRICS[metric] else "minimize", sampler=optuna.samplers.TPESampler(seed=seed)
    )
    results: list[SweepResult] = []
    seen: dict[str, SweepResult] = {}
    with PointRunner(kind=kind, ticks=ticks, settings=settings, workers=workers) as runner:
        while len(results) < trials:
            asked = [study.ask(distributions) for _ in range(min(batch, trials - len(results)))]
            points = [(trial.number, dict(base) | trial.params) for trial in asked]
            fresh = {_point_key(params): (index, params) for index, params in points if _point_key(params) not in seen}
            for result in runner.run(list(fresh.values())):
                seen[_point_key(result.params)] = result
            for trial, (index, params) in zip(asked, points, strict=True):
                earlier = seen[_point_key(params)]
                result = SweepResult(index=index, params=params, refused=earlier.refused, figures=earlier.figures)
                value = None if result.refused else result.value(metric)
                if value is None or not math.isfinite(value):
                    study.tell(trial, state=TrialState.FAIL)
                else:
                    study.tell(trial, value)
                results.append(result)
                on_result(result)
    return results
