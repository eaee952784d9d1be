"""The body of /internal/health: component states plus the loop, lock and reconciliation fields.

Loop health comes from the reported components (a periodic job's report goes stale,
DEGRADED, after twice its cadence: core.jobs), counts from the Prometheus
metrics the orders app keeps (aggregated over the host's processes in multi-process
mode). A loop that this deployment does not run is reported as null, not as failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.metrics_core import Metric

from core.health import Status, worst
from core.metrics import multiprocess_dir
from core.selectors import ComponentView, process_views

# Seed field -> the component whose report says whether that loop runs on time.
LOOP_COMPONENTS = {
    "tradingLoopHealthy": "orders:executor",
    "monitorLoopHealthy": "processor",
    "reconciliationLoopHealthy": "job:orders-reconcile",
}
RECONCILIATION_JOB = "job:orders-reconcile"

# Seed field -> (metric family, sample name): summed over every label set.
COUNT_FIELDS = {
    "lockContentionCount": ("orders_lock_contention", "orders_lock_contention_total"),
    "reconciliationMismatchCount": ("orders_reconciliation_mismatches", "orders_reconciliation_mismatches_total"),
    "reconciliationMissingFromExchange": (
        "orders_reconciliation_missing_at_broker",
        "orders_reconciliation_missing_at_broker",
    ),
    "reconciliationMissingInDb": ("orders_reconciliation_missing_in_db", "orders_reconciliation_missing_in_db"),
    "capitalInvariantViolations": ("orders_capital_invariant_violations", "orders_capital_invariant_violations_total"),
}
LATENCY_FAMILY = "orders_broker_latency_seconds"


def _families() -> list[Metric]:
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return list(registry.collect())
    return list(REGISTRY.collect())


def metric_sums(families: Iterable[Metric]) -> dict[str, float]:
    """Sum each COUNT_FIELDS sample over its label sets; absent families count 0."""
    by_name = {family.name: family for family in families}
    sums: dict[str, float] = {}
    for field, (family_name, sample_name) in COUNT_FIELDS.items():
        family = by_name.get(family_name)
        sums[field] = sum(s.value for s in family.samples if s.name == sample_name) if family else 0.0
    return sums


def latency_histogram(families: Iterable[Metric]) -> dict[str, Any]:
    """Cumulative broker-latency buckets ({"le": count}), with count and sum, over every broker and call."""
    family = next((f for f in families if f.name == LATENCY_FAMILY), None)
    buckets: dict[str, float] = {}
    count = total = 0.0
    if family is not None:
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                buckets[sample.labels["le"]] = buckets.get(sample.labels["le"], 0.0) + sample.value
            elif sample.name.endswith("_count"):
                count += sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
    ordered = dict(sorted(buckets.items(), key=lambda item: float(item[0])))
    return {"buckets": ordered, "count": int(count), "sum_s": total}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def build_report(
    *, database_ok: bool, database_reason: str, components: list[ComponentView], families: list[Metric] | None = None
) -> dict[str, Any]:
    """Return the /internal/health document; pure given its inputs.

    Superseded rows (a restarted process's predecessor) are listed but not counted; a
    component reported by several processes counts with each of its rows, so one
    failing `processor` among two is not hidden by the healthy one.
    """
    families = _families() if families is None else families
    counted = [c for c in components if c.counts]
    statuses = [Status.HEALTHY if database_ok else Status.BLOCKED] + [c.status for c in counted]
    loops: dict[str, bool | None] = {}
    for field, component in LOOP_COMPONENTS.items():
        rows = [c for c in counted if c.component == component and not c.missing]
        loops[field] = None if not rows else all(c.status is Status.HEALTHY for c in rows)
    counts = metric_sums(families)
    if counts["capitalInvariantViolations"] > 0:
        statuses.append(Status.DEGRADED)  # capital that does not add up: not healthy, still serving
    overall = worst(statuses)
    reconciliation = max(
        (c for c in components if c.component == RECONCILIATION_JOB and not c.missing),
        key=lambda c: c.updated_at,
        default=None,
    )
    return {
        "status": overall.value,
        "ready": overall.allows_readiness,
        # True only while every loop this deployment runs is on time.
        "readiness": overall.allows_readiness and all(ok is not False for ok in loops.values()),
        **loops,
        "reconciliationLastRun": _iso(reconciliation.updated_at if reconciliation else None),
        **{field: int(value) for field, value in counts.items()},
        "exchangeLatencyHistogram": latency_histogram(families),
        "database": {"status": "HEALTHY" if database_ok else "BLOCKED", "reason": database_reason},
        "feeds": _states(c for c in counted if c.component.startswith("feed:")),
        "routes": _states(c for c in counted if c.component.startswith("processor")),
        "jobs": _states(c for c in counted if c.component.startswith("job:")),
        "components": [c.as_dict() for c in components],
        "missing": [c.component for c in components if c.missing],
        "processes": [p.as_dict() for p in process_views(components)],
    }


def _states(views: Iterable[ComponentView]) -> dict[str, dict[str, str]]:
    """One state per component name: the worst of the processes that report it."""
    order = [Status.HEALTHY, Status.DEGRADED, Status.BLOCKED]
    states: dict[str, ComponentView] = {}
    for view in views:
        known = states.get(view.component)
        if known is None or order.index(view.status) > order.index(known.status):
            states[view.component] = view
    return {name: {"status": v.status.value, "reason": v.reason} for name, v in states.items()}
