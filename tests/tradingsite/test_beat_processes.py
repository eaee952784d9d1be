"""Real `celery beat` processes on PostgreSQL + Redis: one sends, a standby takes over, sends expire.

Each process runs the production command (`celery -A tradingsite beat`, the scheduler
comes from the settings) with an empty VAR_DIR, against the test database and this
run's Redis database, on a queue of its own so nothing else consumes what it sends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from django_celery_beat.models import PeriodicTask

from core.leases import lease_holder
from core.models import ComponentHealth
from tests.helpers import eventually
from tradingsite.beat_scheduler import BEAT_LEASE

pytestmark = [pytest.mark.needs_postgres, pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
SENT = "Sending due task orders-reconcile"


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Celery:
    """One celery process with its log in a file (a pipe nobody reads would block it)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [CELERY, "-A", "tradingsite", *args, "--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def text(self) -> str:
        return self.log.read_text()

    def count(self, needle: str) -> int:
        return self.text().count(needle)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"beat-test-{uuid.uuid4().hex[:8]}"
    yield name
    redis.Redis.from_url(settings.REDIS_URL).delete(name)


@pytest.fixture
def spawn(tmp_path: Path, queue: str) -> Iterator[object]:
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": queue,
        "VAR_DIR": str(tmp_path / "fresh-var"),  # nothing local: the schedule is in the database
        "BEAT_LEASE_TTL_S": "4",
        "PERIODIC_JOB_INTERVALS": "orders-reconcile=1",
    }
    started: list[Celery] = []

    def start(*args: str) -> Celery:
        process = Celery(list(args), env, tmp_path / f"celery-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(signal.SIGKILL)
    # PostgreSQL ends a killed client's session a moment later; the test database can only
    # be flushed and dropped once it has.
    eventually(lambda: _other_sessions() == 0, timeout_s=30)


def _other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


RECONCILE_TASK = "orders.tasks.reconcile_accounts"


def _queued(queue: str) -> list[dict[str, object]]:
    """The reconcile sends on the queue (the other declared jobs send on their own cadence)."""
    raw = redis.Redis.from_url(settings.REDIS_URL).lrange(queue, 0, -1)
    headers = [json.loads(item)["headers"] for item in raw]
    return [h for h in headers if h.get("task") == RECONCILE_TASK]


def _pid_in_holder() -> int:
    holder = lease_holder(BEAT_LEASE)
    assert holder is not None and holder.owner
    match = re.search(r"pid (\d+)", holder.holder)
    assert match is not None
    return int(match.group(1))


def _beat_rows() -> dict[int, str]:
    return dict(ComponentHealth.objects.filter(role="beat", component="beat").values_list("pid", "reason"))


def test_two_beats_one_sends_and_the_standby_takes_over_when_the_holder_is_killed(spawn, queue: str) -> None:
    first = spawn("beat")
    eventually(lambda: first.count(SENT) >= 1, timeout_s=60)
    second = spawn("beat")
    eventually(lambda: "beat: standby, the beat lease is held by celery beat" in second.text(), timeout_s=60)
    assert f"pid {first.proc.pid}" in second.text()  # the standby names the holder
    eventually(lambda: first.count(SENT) >= 4, timeout_s=30)
    assert second.count(SENT) == 0
    assert _pid_in_holder() == first.proc.pid
    # Both beats list themselves in the site-wide health view, saying which one sends.
    rows = eventually(lambda: _beat_rows() if len(_beat_rows()) == 2 else None, timeout_s=30)
    assert rows[first.proc.pid].startswith("sending: holds the beat lease")
    assert rows[second.proc.pid].startswith("standby: the beat lease is held by celery beat")
    # Every message on the queue came from the holder, each carrying its expiry.
    queued = _queued(queue)
    assert len(queued) == first.count(SENT)
    assert all(headers.get("expires") for headers in queued)

    first.stop(signal.SIGKILL)  # no release: the lease must expire
    sent_by_first = first.count(SENT)
    eventually(lambda: second.count(SENT) >= 2, timeout_s=30)
    assert "beat: holding the beat lease" in second.text()
    assert _pid_in_holder() == second.proc.pid
    assert len(_queued(queue)) == sent_by_first + second.count(SENT)
    row = PeriodicTask.objects.get(name="orders-reconcile")
    assert row.last_run_at is not None and row.total_run_count >= sent_by_first  # the last runs are shared


def test_after_a_worker_outage_the_backlog_expires_instead_of_running(spawn, queue: str) -> None:
    beat = spawn("beat")
    eventually(lambda: beat.count(SENT) >= 4, timeout_s=60)  # no worker: the sends pile up
    beat.stop()  # a clean stop releases the lease
    released = lease_holder(BEAT_LEASE)
    assert released is not None and not released.owner, beat.text()[-3000:]
    backlog = _queued(queue)
    assert len(backlog) == beat.count(SENT) >= 4
    last_expiry = max(datetime.fromisoformat(str(headers["expires"])) for headers in backlog)
    # Wait until the newest message is past its expiry, then bring the worker back.
    eventually(lambda: datetime.now(tz=last_expiry.tzinfo) > last_expiry, timeout_s=10)
    assert _beat_rows() == {}  # a clean stop withdraws the beat's row
    worker = spawn("worker", "-Q", queue, "--pool", "solo", "--without-mingle", "--without-gossip")
    eventually(
        lambda: ComponentHealth.objects.filter(role="worker", component="worker", pid=worker.proc.pid).exists(),
        timeout_s=60,
    )  # the worker lists itself too
    eventually(
        lambda: worker.count("Discarding revoked task: orders.tasks.reconcile_accounts") == len(backlog), timeout_s=60
    )
    assert worker.count("succeeded in") == 0
    assert _queued(queue) == []
