"""A Prometheus collector of the site-wide figures, computed from the database at scrape time.

Families are named `site_*`: they are the whole site's (every account, every feed and
process), the same on every web process's /metrics, so a dashboard takes one of them,
never their sum. The cost is the fixed set of aggregate queries of
tradingsite.site_figures, cached for SITE_FIGURES_CACHE_S. A database error yields
`site_figures_up 0` and no figures: a scrape never fails on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from django.db import DatabaseError
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from orders.site_figures import signal_category
from tradingsite.site_figures import SiteFigures, site_figures

log = logging.getLogger(__name__)

SITE_FAMILIES = (
    "site_figures_up",
    "site_figures_query_seconds",
    "site_orders",
    "site_open_orders",
    "site_fills",
    "site_fills_via_reconciliation",
    "site_open_positions",
    "site_signal_outcomes",
    "site_feed_instruments",
    "site_feed_ticks_last_minute",
    "site_feed_last_tick_timestamp_seconds",
)


class SiteFiguresCollector:
    def __init__(self, figures: Callable[[], SiteFigures] = site_figures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("site_figures_up", "1 when the site-wide figures could be read from the database")
        try:
            figures = self._figures()
        except DatabaseError as exc:
            log.warning("metrics: site-wide figures unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily(
            "site_figures_query_seconds", "Time the site-wide figures' queries took", value=figures.duration_s
        )
        orders = figures.orders
        by_status = GaugeMetricFamily("site_orders", "Order rows in the database by status", labels=["status"])
        for status, n in orders.orders_by_status.items():
            by_status.add_metric([status], n)
        yield by_status
        yield GaugeMetricFamily("site_open_orders", "Orders not in a terminal status", value=orders.open_orders)
        yield GaugeMetricFamily("site_fills", "Fill rows in the database", value=orders.fills)
        yield GaugeMetricFamily(
            "site_fills_via_reconciliation",
            "Fills booked by reconciliation rather than the live path",
            value=orders.fills_via_reconciliation,
        )
        positions = GaugeMetricFamily("site_open_positions", "Open positions by side", labels=["side"])
        for side, n in orders.open_positions_by_side.items():
            positions.add_metric([side], n)
        yield positions
        outcomes = GaugeMetricFamily(
            "site_signal_outcomes",
            "Signal outcomes (one per signal and account): category traded, pending or refused; "
            "the outcome is the refusal reason",
            labels=["category", "outcome"],
        )
        for outcome, n in orders.signals_by_outcome.items():
            outcomes.add_metric([signal_category(outcome), outcome], n)
        yield outcomes
        instruments = GaugeMetricFamily("site_feed_instruments", "Instruments per feed", labels=["feed"])
        recent = GaugeMetricFamily(
            "site_feed_ticks_last_minute", "Ticks recorded with an exchange time in the last 60 s", labels=["feed"]
        )
        last = GaugeMetricFamily(
            "site_feed_last_tick_timestamp_seconds", "Exchange time of the newest recorded tick", labels=["feed"]
        )
        for feed in figures.feeds:
            instruments.add_metric([feed.feed], feed.instruments)
            recent.add_metric([feed.feed], feed.ticks_last_window)
            if feed.last_tick_ns is not None:
                last.add_metric([feed.feed], feed.last_tick_ns / 1e9)
        yield instruments
        yield recent
        yield last
