"""A kind from the example package, loaded by STRATEGY_MODULES, traded live on the simulated venue.

The whole site path in its own processes: `runfeed` on the demo's simulated feed runs
the plug-in kind, its signals go through the executor to the paper broker, and the fills
are booked. Then the same kind backtests the ticks that run recorded.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.helpers_migrated import migrated_var_dir

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "examples" / "strategy-plugin"

SETUP = """
import django; django.setup()
from decimal import Decimal
from feeds.models import Instrument
from orders.models import Account, TradeSetting
from processor.models import Strategy
strategy = Strategy.objects.create(
    name="plug-in breakout", kind="donchian", params={"timeframe_s": 1, "entry_bars": 2, "exit_bars": 2}
)
strategy.instruments.add(Instrument.objects.get(venue_symbol="BTC-USD"))
TradeSetting.objects.create(
    strategy=strategy, account=Account.objects.get(name="Paper"), quantity=Decimal("0.01"), mode="paper"
)
print(strategy.pk)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
            "DEMO_PASSWORD": "plugin-test-password-42",
            "STRATEGY_MODULES": "ts_example_strategies",
            "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), str(ROOT)]),
        }
    )
    return env


def _run(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _count(db: Path, sql: str, *params: object) -> int:
    with sqlite3.connect(db, timeout=30) as connection:
        return int(connection.execute(sql, params).fetchone()[0])


@pytest.mark.embedded_site  # its processes run on their own VAR_DIR's SQLite in every pass
@pytest.mark.timeout(420)  # four Django starts and a live feed; slow on a shared 2-core machine
def test_a_plugin_kind_trades_live_on_the_simulated_venue_and_backtests(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    _run(env, "manage.py", "loaddemo")
    strategy_id = int(_run(env, "-c", SETUP).strip())
    db = tmp_path / "var" / "db.sqlite3"
    feed = subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def traded() -> bool:
            assert feed.poll() is None, "runfeed exited early"
            return (
                _count(
                    db,
                    "SELECT count(*) FROM orders_fill f JOIN orders_order o ON o.id = f.order_id WHERE o.strategy_id = ?",
                    strategy_id,
                )
                >= 1
            )

        eventually(traded, timeout_s=150, interval_s=0.25)
        feed.send_signal(signal.SIGTERM)
        output, _ = feed.communicate(timeout=60)
        assert feed.returncode == 0, output
    finally:
        if feed.poll() is None:
            feed.kill()
            feed.wait()
    assert _count(db, "SELECT count(*) FROM processor_strategysignal WHERE strategy_id = ?", strategy_id) >= 1

    ticks = tmp_path / "recorded.csv"
    _run(env, "manage.py", "exportticks", "--symbol", "BTC-USD", "--feed", "sim", "--output", str(ticks))
    params = json.dumps({"timeframe_s": 1, "entry_bars": 2, "exit_bars": 2})
    args = ["backtest", "--strategy", "donchian", "--params", params, "--ticks", str(ticks), "--report", "json"]
    report = json.loads(_run(env, "manage.py", *args, "--quantity", "0.01"))
    assert report["signals"] >= 1 and sum(report["outcomes"].values()) == report["signals"]
