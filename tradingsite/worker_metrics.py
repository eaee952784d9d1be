"""Prometheus figures of the Celery processes: tasks by name and outcome, their run time, sends.

Connected to Celery's signals when the apps load (tradingsite.metrics), so any process
that runs or sends tasks counts them: a worker counts the tasks it runs (in its pool
children: see PROMETHEUS_MULTIPROC_DIR in docs/metrics.md), beat counts the jobs it
sends. The worker and beat serve their endpoint from their main process once started.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery import signals
from django.conf import settings
from prometheus_client import Counter, Histogram

from core.metrics import mark_process_dead, multiprocess_dir
from tradingsite.process_metrics import serve_process_metrics

log = logging.getLogger(__name__)

TASKS = Counter(
    "celery_tasks_total",
    "Celery tasks finished in this worker, by task name and outcome "
    "(succeeded, failed, retried, ignored, rejected, revoked, unknown)",
    ["task", "outcome"],
)
TASK_DURATION = Histogram(
    "celery_task_duration_seconds",
    "Run time of a Celery task in the worker, by task name",
    ["task"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
TASKS_SENT = Counter("celery_tasks_sent_total", "Tasks this process sent to the broker (beat: its jobs)", ["task"])

# Celery task states -> outcome label.
OUTCOMES = {"SUCCESS": "succeeded", "FAILURE": "failed", "RETRY": "retried", "IGNORED": "ignored"}

_started: dict[str, float] = {}


def _on_prerun(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


def _on_postrun(task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    # Sent after every run, failed or not: one place counts every outcome.
    name = getattr(task, "name", None) or "unknown"
    started = _started.pop(task_id, None) if task_id else None
    if started is not None:
        TASK_DURATION.labels(name).observe(time.perf_counter() - started)
    TASKS.labels(name, OUTCOMES.get(state or "", (state or "unknown").lower())).inc()


def _on_unknown(name: str | None = None, **kwargs: Any) -> None:
    TASKS.labels(name or "unknown", "unknown").inc()


def _on_rejected(message: Any = None, **kwargs: Any) -> None:
    headers = getattr(message, "headers", None) or {}
    TASKS.labels(str(headers.get("task") or "unknown"), "rejected").inc()


def _on_revoked(request: Any = None, **kwargs: Any) -> None:
    TASKS.labels(getattr(request, "name", None) or getattr(request, "task", None) or "unknown", "revoked").inc()


def _on_sent(sender: str | None = None, **kwargs: Any) -> None:
    TASKS_SENT.labels(sender or "unknown").inc()


def _on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    if not settings.WORKER_METRICS_PORT:
        return
    pool = getattr(getattr(sender, "controller", None), "pool", None)
    if type(pool).__module__ == "celery.concurrency.prefork" and not multiprocess_dir():
        # Prefork runs tasks in child processes: without a shared directory their
        # counts never reach the main process that serves the endpoint.
        log.error(
            "metrics: the prefork worker's task figures need PROMETHEUS_MULTIPROC_DIR (an empty directory of "
            "its own); without it %s:%s shows the main process only",
            settings.WORKER_METRICS_ADDR,
            settings.WORKER_METRICS_PORT,
        )
    serve_process_metrics("worker", settings.WORKER_METRICS_PORT, settings.WORKER_METRICS_ADDR)


def _on_beat_init(**kwargs: Any) -> None:
    serve_process_metrics("beat", settings.BEAT_METRICS_PORT, settings.BEAT_METRICS_ADDR)


def _on_child_exit(**kwargs: Any) -> None:
    # A pool child's live gauges go with it; its counters stay in the directory.
    mark_process_dead(os.getpid())


def install() -> None:
    """Connect the handlers (idempotent: Celery's signals keep one receiver per dispatch uid)."""
    for signal, handler in (
        (signals.task_prerun, _on_prerun),
        (signals.task_postrun, _on_postrun),
        (signals.task_unknown, _on_unknown),
        (signals.task_rejected, _on_rejected),
        (signals.task_revoked, _on_revoked),
        (signals.before_task_publish, _on_sent),
        (signals.worker_ready, _on_worker_ready),
        (signals.beat_init, _on_beat_init),
        (signals.worker_process_shutdown, _on_child_exit),
    ):
        signal.connect(handler, weak=False, dispatch_uid=f"tradingsite.worker_metrics.{handler.__name__}")


install()
