"""Prometheus metrics of the platform itself: periodic-job runs, and the multi-process switch.

Multi-process: with PROMETHEUS_MULTIPROC_DIR set (to an empty directory shared by the
processes of one host, set before any of them starts), prometheus_client writes every
value to a per-process file and the web's /metrics (django_prometheus's exporter)
aggregates the files, so it answers for daphne, runfeed and Celery processes alike.
Each gauge names how its per-process values combine (`multiprocess_mode`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram, multiprocess

# -- periodic jobs (core.jobs) ----------------------------------------------------
JOB_DURATION = Histogram(
    "periodic_job_duration_seconds",
    "Run time of a periodic job (loop)",
    ["job"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
JOB_LAST_RUN = Gauge(
    "periodic_job_last_run_timestamp_seconds",
    "Unix time a periodic job last finished",
    ["job", "outcome"],
    multiprocess_mode="max",
)
JOB_FAILURES = Counter("periodic_job_failures_total", "Periodic job runs that raised", ["job"])


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None  # noqa: SIM112  # the client's legacy name


def mark_process_dead(pid: int | None = None) -> None:
    """Drop a finished process's live gauges from the shared directory (no-op single-process)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid or os.getpid())


def observe_job_run(job: str, *, duration_s: float, ok: bool, now: Callable[[], float] = time.time) -> None:
    JOB_DURATION.labels(job).observe(duration_s)
    JOB_LAST_RUN.labels(job, "ok" if ok else "failed").set(now())
    if not ok:
        JOB_FAILURES.labels(job).inc()
