"""Strategy kinds from outside the project: the plug-in point, the simple interfaces, the example package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.fixed_point import SCALE
from feeds.market import MarketData
from processor.signals import SignalKind
from processor.strategies import STRATEGIES, clean_params, kind_choices, strategy_class, unregister_strategy
from processor.strategies.plugins import load_strategy_plugins

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "examples" / "strategy-plugin"
PLUGIN_KINDS = ("donchian", "tick_ema")


@pytest.fixture
def plugin() -> Iterator[list[str]]:
    sys.path.insert(0, str(PLUGIN_DIR))
    try:
        yield load_strategy_plugins(["ts_example_strategies"])
    finally:
        for kind in PLUGIN_KINDS:
            unregister_strategy(kind)
        for name in [m for m in sys.modules if m.startswith("ts_example_strategies")]:
            del sys.modules[name]
        sys.path.remove(str(PLUGIN_DIR))


def ticks(prices: list[float], step_ms: int = 1_000) -> list[MarketData]:
    t0 = 1_764_460_800_000_000_000
    return [
        MarketData("BTC", round(p * SCALE), SCALE, t0 + i * step_ms * 1_000_000, t0 + i * step_ms * 1_000_000)
        for i, p in enumerate(prices)
    ]


def test_the_setting_loads_the_package_and_every_registry_reader_sees_its_kinds(plugin: list[str]) -> None:
    assert plugin == ["donchian", "tick_ema"]
    assert {"donchian", "tick_ema"} <= {kind for kind, _ in kind_choices()}
    assert clean_params("donchian", {"timeframe_s": 60, "entry_bars": 5, "exit_bars": 3})["entry_bars"] == 5
    with pytest.raises(Exception, match="slow must be greater"):
        clean_params("tick_ema", {"timeframe_s": 1, "fast": 5, "slow": 5})


def test_a_module_that_cannot_be_imported_stops_the_start_naming_it() -> None:
    with pytest.raises(ImproperlyConfigured, match="no_such_strategies"):
        load_strategy_plugins(["no_such_strategies"])


def test_a_bar_strategy_decides_on_closed_bars_only(plugin: list[str]) -> None:
    logic = strategy_class("donchian")({"timeframe_s": 1, "entry_bars": 2, "exit_bars": 2})
    # Bars (1 s, one tick each but the second): 10, 11, 10.5/13 (close 13 > highs 10, 11), 12, 9 (< lows), 9.5.
    prices = [10, 11, 10.5, 13, 12, 9, 9.5]
    stamps = [0, 1_000, 2_000, 2_500, 3_000, 4_000, 5_000]
    batch = [
        MarketData("BTC", round(p * SCALE), SCALE, 10**18 + ms * 10**6, 10**18 + ms * 10**6)
        for p, ms in zip(prices, stamps, strict=True)
    ]
    rows: list = []
    signals: list = []
    logic.fold(batch, rows, signals)
    assert len(rows) == len(batch)
    # The 10.5..13 bar closes when 12 arrives (index 4): long. The 12 bar closes at 9 (index 5):
    # lows of the two bars before it are 10.5 and 12... 12 is not below 10.5, no exit yet; the
    # 9 bar closes at 9.5 (index 6): 9 < min(10.5, 12) -> exit.
    assert [(i, kind) for i, kind, _, _ in signals] == [(4, SignalKind.ENTRY_LONG), (6, SignalKind.EXIT_LONG)]
    assert signals[0][2] == 12 * SCALE  # the price of the tick that closed the bar


def test_warm_up_fills_indicators_without_a_signal(plugin: list[str]) -> None:
    logic = strategy_class("donchian")({"timeframe_s": 1, "entry_bars": 2, "exit_bars": 2})
    logic.warm(ticks([10, 11, 13, 14, 15]))
    assert logic.upper > 0 and logic.has_open_position is False


def test_the_per_tick_interface_gives_the_built_in_kinds_signals(plugin: list[str]) -> None:
    import random

    rng = random.Random(4)
    price, prices = 100.0, []
    for _ in range(5_000):
        price *= 1 + rng.gauss(0, 0.002)
        prices.append(round(price, 2))
    batch = ticks(prices, step_ms=250)
    params = {"timeframe_s": 2, "fast": 3, "slow": 8}
    built_in = strategy_class("ema")(clean_params("ema", params))
    simple = strategy_class("tick_ema")(clean_params("tick_ema", params))
    rows_a: list = []
    rows_b: list = []
    signals_a: list = []
    signals_b: list = []
    built_in.fold(batch, rows_a, signals_a)
    simple.fold(batch, rows_b, signals_b)
    assert len(signals_a) > 20
    assert [(i, k, p) for i, k, p, _ in signals_b] == [(i, k, p) for i, k, p, _ in signals_a]
    assert [v for r in rows_b for v in r[2:]] == pytest.approx([v for r in rows_a for v in r[2:]])


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
            "STRATEGY_MODULES": "ts_example_strategies",
            "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), str(ROOT)]),
        }
    )
    return env


def test_manage_backtests_a_plugin_kind_named_by_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "walk.csv"
    lines = ["ts_ms,symbol,price,volume"] + [
        f"{1_764_460_800_000 + i * 500},BTC-USD,{100 + (i % 40 if (i // 40) % 2 == 0 else 40 - i % 40)},1"
        for i in range(2_000)
    ]
    path.write_text("\n".join(lines) + "\n")
    params = json.dumps({"timeframe_s": 2, "entry_bars": 3, "exit_bars": 3})
    result = subprocess.run(
        [sys.executable, "manage.py", "backtest", "--strategy", "donchian", "--params", params, "--ticks", str(path),
         "--report", "json", "--quantity", "1"],
        cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["trades"] > 0 and report["outcomes"].get("placed", 0) > 0
    assert "donchian" in result.stderr


def test_without_the_setting_the_kind_is_unknown(tmp_path: Path) -> None:
    env = _env(tmp_path)
    del env["STRATEGY_MODULES"]
    result = subprocess.run(
        [sys.executable, "manage.py", "backtest", "--strategy", "donchian", "--params", "{}", "--ticks", "x.csv"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0 and "unknown strategy kind" in result.stderr
    assert "donchian" not in STRATEGIES
