"""A real Celery worker (prefork, its pool children writing to a multi-process directory) and a real
beat serve their own Prometheus endpoints: tasks by name and outcome, run times, jobs sent.

Started as the deployment starts them, against the real Redis and PostgreSQL, and scraped
over HTTP.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import eventually
from tradingsite.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
CLEAR = "tradingsite.tasks.clear_expired_sessions"


def _free_port() -> int:
    # Within this engineer's port range when one is free there, else any free port.
    for port in range(8810, 8899):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _scrape(port: int) -> str | None:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return None


def _value(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def _stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        return process.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0]


@pytest.mark.needs_postgres
@pytest.mark.needs_redis
@pytest.mark.django_db(transaction=True)
def test_a_prefork_worker_and_beat_serve_task_figures_with_their_role(tmp_path: Path) -> None:
    queue = f"test-{uuid.uuid4().hex[:8]}"  # nobody else's worker takes these tasks
    worker_port, beat_port = _free_port(), 0
    multiproc = tmp_path / "worker-metrics"
    multiproc.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "VAR_DIR": str(tmp_path),
        "CELERY_QUEUE": queue,
        "PERIODIC_JOB_INTERVALS": "clear-expired-sessions=1",
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
        "WORKER_METRICS_PORT": str(worker_port),
    }
    common = [sys.executable, "-m", "celery", "-A", "tradingsite"]
    worker = subprocess.Popen(
        [*common, "worker", "--pool", "prefork", "--concurrency", "2", "--loglevel", "INFO"]
        + ["--without-mingle", "--without-gossip", "--queues", queue],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    beat: subprocess.Popen[str] | None = None
    outputs: list[str] = []
    try:
        assert eventually(lambda: _scrape(worker_port), timeout_s=90, interval_s=0.5)
        # Two runs that succeed, one with an argument the task does not take, one task nobody registered.
        for _ in range(2):
            celery_app.send_task(CLEAR, queue=queue)
        celery_app.send_task(CLEAR, args=["unexpected"], queue=queue)
        celery_app.send_task("tradingsite.tasks.no_such_task", queue=queue)

        def counted() -> str | None:
            text = _scrape(worker_port)
            if text is None:
                return None
            done = _value(text, "celery_tasks_total", task=CLEAR, outcome="succeeded")
            failed = _value(text, "celery_tasks_total", task=CLEAR, outcome="failed")
            unknown = _value(text, "celery_tasks_total", task="tradingsite.tasks.no_such_task", outcome="unknown")
            return text if (done, failed, unknown) == (2, 1, 1) else None

        text = eventually(counted, timeout_s=60, interval_s=0.5)
        assert _value(text, "celery_task_duration_seconds_count", task=CLEAR, role="worker") == 3
        assert _value(text, "celery_tasks_total", role="worker") == 4  # every sample carries the role
        # The job's own figures, recorded in the pool children, reach the main process's endpoint.
        assert _value(text, "periodic_job_duration_seconds_count", job="clear-expired-sessions") == 2

        beat_port = _free_port()
        beat = subprocess.Popen(
            [*common, "beat", "--loglevel", "INFO", "--max-interval", "1"]
            + ["--schedule", str(tmp_path / "beat-schedule")],
            cwd=ROOT,
            env={
                **{k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
                "BEAT_METRICS_PORT": str(beat_port),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def beat_sent() -> str | None:
            text = _scrape(beat_port)
            return text if text and _value(text, "celery_tasks_sent_total", task=CLEAR, role="beat") >= 1 else None

        assert eventually(beat_sent, timeout_s=90, interval_s=0.5)
        # What beat sent, the worker ran.
        assert eventually(
            lambda: _value(_scrape(worker_port) or "", "celery_tasks_total", task=CLEAR, outcome="succeeded") >= 3,
            timeout_s=60,
            interval_s=0.5,
        )
    finally:
        if beat is not None:
            outputs.append(_stop(beat))
        outputs.append(_stop(worker))
        print(*outputs, sep="\n----\n")


def test_an_endpoint_port_already_taken_is_logged_and_the_process_goes_on(caplog) -> None:  # type: ignore[no-untyped-def]
    from tradingsite.process_metrics import serve_process_metrics

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        assert serve_process_metrics("worker", taken, "127.0.0.1") is False
    assert "cannot serve its endpoint" in caplog.text
    assert serve_process_metrics("worker", 0, "127.0.0.1") is False  # off
