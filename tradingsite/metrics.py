"""Prometheus metrics that belong to no single app.

Apps keep their own metrics beside their code (feeds.metrics, orders.metrics); this
module adds what is seen from the wiring layer: component health and its transitions
(reconnects, breaker trips and degraded routes show there), feed lag, processor
mailbox depth and routes, signals, periodic-job durations and last runs, and the
dashboard's own websocket figures.

Multi-process: with PROMETHEUS_MULTIPROC_DIR set (to an empty directory shared by the
processes of one host, set before any of them starts), prometheus_client writes every
value to a per-process file and the web's /metrics (django_prometheus's exporter)
aggregates the files, so it answers for daphne, runfeed and Celery processes alike.
Each gauge names how its per-process values combine (`multiprocess_mode`).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from prometheus_client import Counter, Gauge, Histogram, multiprocess

from tradingsite.health import Health, Status

if TYPE_CHECKING:
    from feeds.market import FeedData
    from tradingsite.runtime.core import RuntimeContext

log = logging.getLogger(__name__)

STATUS_VALUE = {Status.HEALTHY: 0, Status.DEGRADED: 1, Status.BLOCKED: 2}

# -- component health (every runtime process) ------------------------------------
COMPONENT_STATUS = Gauge(
    "runtime_component_status", "Component health: 0 HEALTHY, 1 DEGRADED, 2 BLOCKED", ["component"],
    multiprocess_mode="max",
)
HEALTH_TRANSITIONS = Counter(
    "runtime_health_transitions_total", "Component health changes, by the status entered", ["component", "status"]
)
FEED_RECONNECTS = Counter(
    "feed_reconnects_total", "Times a feed stream left HEALTHY to (re)connect", ["component"]
)
BREAKER_OPEN = Gauge(
    "feed_breaker_open", "1 while a feed stream's circuit breaker keeps it from dialling", ["component"],
    multiprocess_mode="max",
)
FEED_LAG = Gauge(
    "feed_lag_seconds", "Receive time minus exchange time of the newest event of the last batch", ["feed"],
    multiprocess_mode="max",
)
FEED_LAST_EVENT = Gauge(
    "feed_last_event_timestamp_seconds", "Exchange time of the newest event seen", ["feed"], multiprocess_mode="max"
)

# -- processor (sampled from the running processor) -------------------------------
MAILBOX_DEPTH = Gauge(
    "processor_mailbox_depth", "Ticks queued in every route's mailboxes", multiprocess_mode="livesum"
)
ROUTES = Gauge("processor_routes", "Strategy routes by state", ["state"], multiprocess_mode="livesum")
DEGRADED_ROUTES = Gauge(
    "processor_degraded_routes", "Routes degraded (mailbox overflow, failure)", multiprocess_mode="livesum"
)
SIGNALS_STORED = Counter("processor_signals_stored_total", "Signals written to the database")
SIGNALS_DROPPED = Counter("processor_signals_dropped_total", "Signals the store buffer could not hold")

# -- periodic jobs (tradingsite.jobs) ---------------------------------------------
JOB_DURATION = Histogram(
    "periodic_job_duration_seconds", "Run time of a periodic job (loop)", ["job"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
JOB_LAST_RUN = Gauge(
    "periodic_job_last_run_timestamp_seconds", "Unix time a periodic job last finished", ["job", "outcome"],
    multiprocess_mode="max",
)
JOB_FAILURES = Counter("periodic_job_failures_total", "Periodic job runs that raised", ["job"])

# -- dashboard websockets (web processes) -----------------------------------------
WS_CONNECTIONS = Gauge("dashboard_websockets_open", "Open dashboard websockets", multiprocess_mode="livesum")
WS_BATCHES = Counter("dashboard_batches_sent_total", "Conflated batches sent to browsers")
WS_ROWS_CONFLATED = Counter("dashboard_rows_conflated_total", "Rows replaced by a newer one before sending")
WS_STALLED = Counter("dashboard_stalled_disconnects_total", "Browsers disconnected for not acknowledging")
CONTROL_CHANGES = Counter("dashboard_control_changes_total", "Strategy, trade-setting and kill-switch changes", ["action"])

# Every family the issue asks /metrics to carry, with the module that defines it; the
# metrics tests check the endpoint against this list.
REQUIRED_FAMILIES: dict[str, str] = {
    "feed_ticks_received": "feeds.metrics",  # ticks received per venue
    "feed_frames_malformed": "feeds.metrics",  # skipped per venue and reason
    "feed_reconnects": __name__,
    "feed_breaker_open": __name__,
    "feed_lag_seconds": __name__,
    "processor_mailbox_depth": __name__,
    "processor_degraded_routes": __name__,
    "processor_signals_stored": __name__,
    "orders_signal_to_ack_seconds": "orders.metrics",  # order latency
    "orders_reconciliation_mismatches": "orders.metrics",
    "orders_lock_contention": "orders.metrics",
    "orders_capital_invariant_violations": "orders.metrics",
    "periodic_job_duration_seconds": __name__,  # loop durations
    "periodic_job_last_run_timestamp_seconds": __name__,  # last-run times
    "runtime_component_status": __name__,
}


def load_metric_modules() -> None:
    """Import every module of REQUIRED_FAMILIES so each family is exported from the start."""
    from importlib import import_module

    for module in sorted(set(REQUIRED_FAMILIES.values())):
        import_module(module)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None  # noqa: SIM112  # the client's legacy name


def mark_process_dead(pid: int | None = None) -> None:
    """Drop a finished process's live gauges from the shared directory (no-op single-process)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid or os.getpid())


# -- observers -------------------------------------------------------------------


def observe_health_change(component: str, before: Health | None, after: Health) -> None:
    """HealthBoard listener: count transitions; a feed stream leaving HEALTHY is a reconnect."""
    COMPONENT_STATUS.labels(component).set(STATUS_VALUE[after.status])
    if before is None or before.status != after.status:
        HEALTH_TRANSITIONS.labels(component, after.status.value).inc()
    if component.startswith("feed:") and "/" in component:
        # Stream components are "feed:<name>/<stream>"; "feed:<name>" is their roll-up.
        if before is not None and before.status is Status.HEALTHY and after.status is not Status.HEALTHY:
            FEED_RECONNECTS.labels(component).inc()
        BREAKER_OPEN.labels(component).set(1 if "breaker" in after.reason.lower() and after.status is Status.BLOCKED else 0)


def observe_job_run(job: str, *, duration_s: float, ok: bool, now: Callable[[], float] = time.time) -> None:
    JOB_DURATION.labels(job).observe(duration_s)
    JOB_LAST_RUN.labels(job, "ok" if ok else "failed").set(now())
    if not ok:
        JOB_FAILURES.labels(job).inc()


def observe_feed_batch(batch: "FeedData") -> None:
    """Record lag from the newest event of a batch (pure apart from the gauges)."""
    newest = None
    for event in batch.events:
        ts_event = getattr(event, "ts_event", None)
        if ts_event is not None and (newest is None or ts_event > newest.ts_event):
            newest = event
    if newest is None:
        return
    ts_recv = getattr(newest, "ts_recv", None) or time.time_ns()
    FEED_LAG.labels(batch.feed).set(max(0, ts_recv - newest.ts_event) / 1e9)
    FEED_LAST_EVENT.labels(batch.feed).set(newest.ts_event / 1e9)


class ProcessorSampler:
    """Copies the running processor's figures into gauges; counters advance by the difference."""

    def __init__(self) -> None:
        self._signals_stored = 0
        self._signals_dropped = 0

    def sample(self, resources: dict[str, Any]) -> None:
        processor = resources.get("processor")
        if processor is not None:
            MAILBOX_DEPTH.set(processor.backlog())
            states: dict[str, int] = {}
            for route in processor.snapshot.routes_by_strategy.values():
                name = type(route.state).__name__.lower()
                states[name] = states.get(name, 0) + 1
            for state in ("active", "stopping", "degraded"):
                ROUTES.labels(state).set(states.get(state, 0))
            DEGRADED_ROUTES.set(states.get("degraded", 0))
        events = resources.get("strategy_events")
        if events is not None:
            SIGNALS_STORED.inc(max(0, events.signals_stored - self._signals_stored))
            SIGNALS_DROPPED.inc(max(0, events.dropped_signals - self._signals_dropped))
            self._signals_stored, self._signals_dropped = events.signals_stored, events.dropped_signals


async def sample_runtime_forever(
    ctx: "RuntimeContext", *, interval_s: float, sleep: Callable[[float], Any] = asyncio.sleep
) -> None:
    """Refresh the sampled gauges of this runtime process every `interval_s` until cancelled."""
    sampler = ProcessorSampler()
    while True:
        try:
            sampler.sample(ctx.resources)
        except Exception:  # a metric must never stop the runtime
            log.warning("metrics: sampling the processor failed", exc_info=True)
        await sleep(interval_s)
