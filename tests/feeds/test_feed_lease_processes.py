"""Real runfeed processes for one feed on PostgreSQL: one holds it, the other waits as standby.

Killed with SIGKILL, the holder's lease expires and the standby takes the feed over from
the persisted checkpoint; stopped with SIGTERM, the holder gives the lease back and the
standby takes over at once. Either way the simulated feed's recorded tape has no
repeated (instrument, trade id) and no missing trade id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from core.leases import lease_holder
from feeds.models import Tick
from tests.feeds.factories import make_feed
from tests.helpers import eventually

pytestmark = [pytest.mark.needs_postgres, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
SYMBOLS = ("BTCUSDT", "ETHUSDT")


def feed_env(tmp_path: Path, *, ttl_s: float) -> dict[str, str]:
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "DATABASE_URL": url,  # the test database: this process reads what the children record
            "VAR_DIR": str(tmp_path / "var"),
            "FEED_LEASE_TTL_S": str(ttl_s),
            "FEED_LEASE_RENEW_S": str(ttl_s / 4),
            "FEED_LEASE_POLL_S": "0.2",
            "RECORDER_FLUSH_INTERVAL_S": "0.1",
            "RUNTIME_STOP_TIMEOUT_S": "10",
        }
    )
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    return env


class Runfeed:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text()

    def says(self, text: str) -> bool:
        assert self.process.poll() is None, self.output()
        return text in self.output()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def runfeeds(tmp_path: Path) -> Iterator[list[Runfeed]]:
    started: list[Runfeed] = []
    yield started
    for process in started:
        process.stop()


def trade_ids() -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {symbol: [] for symbol in SYMBOLS}
    for symbol, trade_id in Tick.objects.values_list("instrument__venue_symbol", "trade_id"):
        ids[symbol].append(int(trade_id))
    return ids


def assert_whole_tape(ids: dict[str, list[int]]) -> None:
    """Each instrument's ids are 1..n, each once: no repeat and no gap."""
    for symbol, recorded in ids.items():
        assert len(recorded) == len(set(recorded)), f"{symbol}: a trade id recorded twice"
        assert sorted(recorded) == list(range(1, len(recorded) + 1)), f"{symbol}: trade ids missing"


def recorded_beyond(count: int) -> bool:
    return Tick.objects.count() > count


def start_pair(tmp_path: Path, runfeeds: list[Runfeed], ttl_s: float) -> tuple[Runfeed, Runfeed]:
    make_feed("sim", SYMBOLS, settings={"interval_ms": 10})
    env = feed_env(tmp_path, ttl_s=ttl_s)
    holder = Runfeed(env, tmp_path / "first.log")
    runfeeds.append(holder)
    eventually(lambda: holder.says("runfeed: holding feed:sim"), timeout_s=60)
    standby = Runfeed(env, tmp_path / "second.log")
    runfeeds.append(standby)
    eventually(lambda: recorded_beyond(40), timeout_s=60)
    # The standby names the holder: its role, host and pid, and the lease's expiry.
    eventually(lambda: standby.says("standby: feed:sim is held by runfeed --feed sim on "), timeout_s=60)
    assert f"pid {holder.pid} until " in standby.output()
    assert "runfeed: starting" not in standby.output()
    return holder, standby


def test_sigkill_of_the_holder_hands_the_feed_to_the_standby_without_a_gap_or_a_repeat(
    tmp_path: Path, runfeeds: list[Runfeed]
) -> None:
    holder, standby = start_pair(tmp_path, runfeeds, ttl_s=2.0)
    held = lease_holder("feed:sim")
    assert held is not None and held.holder.endswith(f"pid {holder.pid}")
    before_kill = Tick.objects.count()
    holder.process.send_signal(signal.SIGKILL)
    holder.process.wait(timeout=30)
    last_expiry = lease_holder("feed:sim").expires_at  # type: ignore[union-attr]  # the dead holder's last renewal
    eventually(lambda: standby.says("runfeed: took over feed:sim"), timeout_s=60)
    taken = lease_holder("feed:sim")
    assert taken is not None and taken.holder.endswith(f"pid {standby.pid}")
    assert taken.acquired_at > last_expiry  # never while the killed holder's lease could still be live
    eventually(lambda: recorded_beyond(before_kill + 100), timeout_s=60)
    standby.process.send_signal(signal.SIGTERM)
    assert standby.process.wait(timeout=60) == 0, standby.output()
    assert_whole_tape(trade_ids())


def test_sigterm_of_the_holder_hands_the_feed_over_at_once(tmp_path: Path, runfeeds: list[Runfeed]) -> None:
    # A long TTL: a takeover before it ran out can only come from the released lease.
    holder, standby = start_pair(tmp_path, runfeeds, ttl_s=60.0)
    held = lease_holder("feed:sim")
    assert held is not None and held.holder.endswith(f"pid {holder.pid}")
    holder.process.send_signal(signal.SIGTERM)
    assert holder.process.wait(timeout=60) == 0, holder.output()
    eventually(lambda: standby.says("runfeed: took over feed:sim"), timeout_s=60)
    taken = lease_holder("feed:sim")
    assert taken is not None and taken.holder.endswith(f"pid {standby.pid}")
    assert taken.acquired_at < held.expires_at  # before the old lease would have run out
    count = Tick.objects.count()
    eventually(lambda: recorded_beyond(count + 100), timeout_s=60)
    standby.process.send_signal(signal.SIGTERM)
    assert standby.process.wait(timeout=60) == 0, standby.output()
    assert lease_holder("feed:sim").owner == ""  # type: ignore[union-attr]  # given back at the clean stop
    assert_whole_tape(trade_ids())
