"""SIGKILL with an open position, restart: the strategy resumes it and its next exit closes it.

A real `manage.py runfeed` on the simulated venue trades the demo's volume-breakout
strategy on the paper broker. Once its entry has filled, the process is killed; the
restarted process must come up holding that position, so the first signal the
strategy emits afterwards is the exit of that position, and that exit closes it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.helpers import eventually
from tests.helpers_migrated import migrated_var_dir
from tests.tradingsite.test_smoke_runsite import ROOT, manage, site_env

STRATEGY = "sol-volume-breakout"
# Every tick is a bar (ticks are 0.1 to 10 SOL); an entry is a 5-bar breakout, and the hold
# is long enough that only an opposite breakout ends a position.
PARAMS = {"bar_volume": "0.1", "lookback": 5, "hold_bars": 100_000, "cooldown_bars": 0}
EXIT_OF = {"LONG": "EXIT_LONG", "SHORT": "EXIT_SHORT"}

CONFIGURE = f"""
from feeds.models import Feed
from processor.models import Strategy
Strategy.objects.exclude(name={STRATEGY!r}).update(enabled=False)
Strategy.objects.filter(name={STRATEGY!r}).update(params={json.dumps(PARAMS)})
feed = Feed.objects.get(name="sim")
feed.settings = {{**feed.settings, "interval_ms": 50}}
feed.save()
"""


class SiteDatabase:
    """Reads of the subprocess's SQLite database (the test process has its own)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, *args: object) -> list[tuple]:
        with sqlite3.connect(self.path, timeout=10) as db:
            return db.execute(sql, args).fetchall()

    def strategy_id(self) -> int:
        [(pk,)] = self.rows("SELECT id FROM processor_strategy WHERE name = ?", STRATEGY)
        return pk

    def open_positions(self, strategy_id: int) -> list[tuple[int, str, int]]:
        return self.rows(
            "SELECT id, side, quantity FROM orders_position WHERE strategy_id = ? AND state = 'OPEN'", strategy_id
        )

    def working_exits(self, position_id: int) -> list[tuple]:
        return self.rows(
            "SELECT id FROM orders_order WHERE position_id = ? AND intent = 'EXIT' "
            "AND status NOT IN ('FILLED', 'CANCELED', 'REJECTED', 'EXPIRED')",
            position_id,
        )

    def signals_after(self, strategy_id: int, last_id: int) -> list[tuple[int, str]]:
        return self.rows(
            "SELECT id, kind FROM processor_strategysignal WHERE strategy_id = ? AND id > ? ORDER BY id",
            strategy_id,
            last_id,
        )


def runfeed(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
    )


def test_after_sigkill_the_restarted_strategy_exits_the_position_it_opened_before(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    manage(env, "loaddemo")
    manage(env, "shell", "-c", CONFIGURE)
    db = SiteDatabase(tmp_path / "var" / "db.sqlite3")
    strategy_id = db.strategy_id()
    log = tmp_path / "runfeed.log"

    first = runfeed(env, log)
    try:

        def entry_filled() -> tuple[int, str, int] | None:
            assert first.poll() is None, log.read_text()
            filled = [p for p in db.open_positions(strategy_id) if p[2] > 0]
            return filled[0] if filled else None

        eventually(entry_filled, timeout_s=90, interval_s=0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()

    # What the killed process left: one filled position and nothing closing it.
    [(position_id, side, quantity)] = db.open_positions(strategy_id)
    assert quantity > 0 and db.working_exits(position_id) == []
    [(last_signal,)] = db.rows("SELECT COALESCE(MAX(id), 0) FROM processor_strategysignal")

    second = runfeed(env, log)
    try:

        def closed() -> bool:
            assert second.poll() is None, log.read_text()
            [(state, left)] = db.rows("SELECT state, quantity FROM orders_position WHERE id = ?", position_id)
            return state == "CLOSED" and left == 0

        eventually(closed, timeout_s=120, interval_s=0.2)
        # The restarted strategy knew it held the position: its first signal is that exit,
        # not an entry on top of it (which the orders side would refuse as already open).
        # Signals are stored in batches, so the exit can fill before its signal row lands.
        signals = eventually(lambda: db.signals_after(strategy_id, last_signal), timeout_s=30, interval_s=0.1)
        assert signals[0][1] == EXIT_OF[side], signals
        [(exit_status, exit_quantity)] = db.rows(
            "SELECT status, filled_quantity FROM orders_order WHERE position_id = ? AND intent = 'EXIT'", position_id
        )
        assert exit_status == "FILLED" and exit_quantity == quantity
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0, log.read_text()
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
