"""Prometheus metrics that belong to no single app.

Apps keep their own metrics beside their code (feeds.metrics, orders.metrics); this
module adds what is seen from the wiring layer: component health and its transitions
(reconnects, breaker trips and degraded routes show there), feed lag, processor
mailbox depth and routes, and signals. Periodic-job figures and the multi-process
switch are the platform's (core.metrics); the dashboard's websocket figures are
dashboard.metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge

from core.health import Health, Status

if TYPE_CHECKING:
    from feeds.market import FeedData
    from processor.processor import Processor
    from processor.publishing import LiveStrategyEvents
    from tradingsite.runtime.hubs import RuntimeHubs

log = logging.getLogger(__name__)

STATUS_VALUE = {Status.HEALTHY: 0, Status.DEGRADED: 1, Status.BLOCKED: 2}

# -- component health (every runtime process) ------------------------------------
COMPONENT_STATUS = Gauge(
    "runtime_component_status",
    "Component health: 0 HEALTHY, 1 DEGRADED, 2 BLOCKED",
    ["component"],
    multiprocess_mode="max",
)
HEALTH_TRANSITIONS = Counter(
    "runtime_health_transitions_total", "Component health changes, by the status entered", ["component", "status"]
)
FEED_RECONNECTS = Counter("feed_reconnects_total", "Times a feed stream left HEALTHY to (re)connect", ["component"])
BREAKER_OPEN = Gauge(
    "feed_breaker_open",
    "1 while a feed stream's circuit breaker keeps it from dialling",
    ["component"],
    multiprocess_mode="max",
)
FEED_LAG = Gauge(
    "feed_lag_seconds",
    "Receive time minus exchange time of the newest event of the last batch",
    ["feed"],
    multiprocess_mode="max",
)
FEED_LAST_EVENT = Gauge(
    "feed_last_event_timestamp_seconds", "Exchange time of the newest event seen", ["feed"], multiprocess_mode="max"
)

# -- processor (sampled from the running processor) -------------------------------
MAILBOX_DEPTH = Gauge("processor_mailbox_depth", "Ticks queued in every route's mailboxes", multiprocess_mode="livesum")
ROUTES = Gauge("processor_routes", "Strategy routes by state", ["state"], multiprocess_mode="livesum")
DEGRADED_ROUTES = Gauge(
    "processor_degraded_routes", "Routes degraded (mailbox overflow, failure)", multiprocess_mode="livesum"
)
SIGNALS_STORED = Counter("processor_signals_stored_total", "Signals written to the database")
SIGNALS_DROPPED = Counter("processor_signals_dropped_total", "Signals the store buffer could not hold")

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
    "periodic_job_duration_seconds": "core.metrics",  # loop durations
    "periodic_job_last_run_timestamp_seconds": "core.metrics",  # last-run times
    "runtime_component_status": __name__,
    "celery_tasks": "tradingsite.worker_metrics",  # worker tasks by name and outcome
    "celery_task_duration_seconds": "tradingsite.worker_metrics",
}


def load_metric_modules() -> None:
    """Import every module of REQUIRED_FAMILIES so each family is exported from the start."""
    from importlib import import_module

    for module in sorted(set(REQUIRED_FAMILIES.values())):
        import_module(module)


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
        BREAKER_OPEN.labels(component).set(
            1 if "breaker" in after.reason.lower() and after.status is Status.BLOCKED else 0
        )


def observe_feed_batch(batch: FeedData) -> None:
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

    def sample(self, processor: Processor | None, events: LiveStrategyEvents | None) -> None:
        if processor is not None:
            MAILBOX_DEPTH.set(processor.backlog())
            states = processor.route_state_counts()
            for state in ("active", "stopping", "degraded"):
                ROUTES.labels(state).set(states.get(state, 0))
            DEGRADED_ROUTES.set(states.get("degraded", 0))
        if events is not None:
            SIGNALS_STORED.inc(max(0, events.signals_stored - self._signals_stored))
            SIGNALS_DROPPED.inc(max(0, events.dropped_signals - self._signals_dropped))
            self._signals_stored, self._signals_dropped = events.signals_stored, events.dropped_signals


async def sample_runtime_forever(
    hubs: RuntimeHubs, *, interval_s: float, sleep: Callable[[float], Any] = asyncio.sleep
) -> None:
    """Refresh the sampled gauges of this runtime process every `interval_s` until cancelled."""
    sampler = ProcessorSampler()
    while True:
        try:
            sampler.sample(hubs.processor.processor.get_or(None), hubs.processor.strategy_events.get_or(None))
        except Exception:  # a metric must never stop the runtime
            log.warning("metrics: sampling the processor failed", exc_info=True)
        await sleep(interval_s)
