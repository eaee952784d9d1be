"""Site-wide trading figures: the apps' database selectors, assembled for /internal/health and /metrics.

Computed from the database, so every web process answers the same whatever process
placed the orders or recorded the ticks. A web process computes them at most once per
SITE_FIGURES_CACHE_S, however many scrapers and dashboards ask.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from feeds.site_figures import WINDOW_S, FeedTickFigures, feed_tick_figures
from orders.site_figures import OrderFigures, order_figures

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SiteFigures:
    orders: OrderFigures
    feeds: list[FeedTickFigures]
    computed_at: float  # Unix time
    duration_s: float  # how long the queries took


def compute_site_figures(clock: Callable[[], float] = time.time) -> SiteFigures:
    started = time.perf_counter()
    orders = order_figures()
    feeds = feed_tick_figures(now_ns=int(clock() * 1e9))
    return SiteFigures(orders=orders, feeds=feeds, computed_at=clock(), duration_s=time.perf_counter() - started)


_lock = threading.Lock()
_cached: SiteFigures | None = None


def site_figures() -> SiteFigures:
    """The figures, recomputed when older than SITE_FIGURES_CACHE_S (one computation at a time)."""
    global _cached
    ttl = settings.SITE_FIGURES_CACHE_S
    with _lock:
        if _cached is None or ttl <= 0 or time.time() - _cached.computed_at >= ttl:
            _cached = compute_site_figures()
        return _cached


def forget_cached() -> None:
    global _cached
    with _lock:
        _cached = None


def site_figures_document(figures: SiteFigures | None = None) -> dict[str, Any]:
    """The /internal/health `siteFigures` value (JSON-ready)."""
    figures = site_figures() if figures is None else figures
    orders = asdict(figures.orders)
    return {
        "source": "database",
        "computedAt": figures.computed_at,
        "ordersByStatus": orders["orders_by_status"],
        "openOrders": orders["open_orders"],
        "fills": orders["fills"],
        "fillsViaReconciliation": orders["fills_via_reconciliation"],
        "openPositionsBySide": orders["open_positions_by_side"],
        "signalsByCategory": orders["signals_by_category"],
        "signalsByOutcome": {k: v for k, v in orders["signals_by_outcome"].items() if v},
        "tickWindowSeconds": WINDOW_S,
        "feeds": {
            f.feed: {
                "enabled": f.enabled,
                "instruments": f.instruments,
                "ticksLastWindow": f.ticks_last_window,
                "lastTickNs": f.last_tick_ns,
                "lastTickAgeS": None
                if f.last_tick_ns is None
                else round(figures.computed_at - f.last_tick_ns / 1e9, 3),
            }
            for f in figures.feeds
        },
    }


def site_figures_field(*, database_ok: bool, metric_peers: list[dict[str, object]] | None = None) -> dict[str, Any]:
    """The `siteFigures` value: the database figures (None when they cannot be read: never a 500),
    and which peer endpoints the report's counts were summed over."""
    figures: dict[str, Any] | None = None
    if database_ok:
        try:
            figures = site_figures_document()
        except DatabaseError as exc:
            log.warning("site-wide figures unavailable: %s", exc)
    return {"database": figures, "metricPeers": metric_peers or []}
