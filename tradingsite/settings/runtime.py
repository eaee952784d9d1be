"""The runtime processes (runsite, runfeed): push cadence, health reports, clean stops, metrics."""

from __future__ import annotations

from tradingsite.settings.base import env

# Browser pushes are conflated: at most one per instrument per interval.
DASHBOARD_PUSH_INTERVAL_S = env.float("DASHBOARD_PUSH_INTERVAL_S", default=0.25)
HEALTH_REPORT_INTERVAL_S = env.float("HEALTH_REPORT_INTERVAL_S", default=2.0)
# A clean stop (SIGINT/SIGTERM) drains in-flight trades and books the broker's fills
# within this bound, then cancels what is left.
RUNTIME_STOP_TIMEOUT_S = env.float("RUNTIME_STOP_TIMEOUT_S", default=20.0)
# A component whose process stopped reporting for this long counts as BLOCKED.
HEALTH_STALE_AFTER_S = env.float("HEALTH_STALE_AFTER_S", default=15.0)
# Prometheus scrapers authenticate with this bearer token; staff sessions also work.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# runfeed exposes its own Prometheus endpoint on this port when set (0 = off).
RUNTIME_METRICS_PORT = env.int("RUNTIME_METRICS_PORT", default=0)
RUNTIME_METRICS_ADDR = env.str("RUNTIME_METRICS_ADDR", default="127.0.0.1")
# Several processes on one host (daphne, runfeed, celery) share counters through this
# directory; prometheus_client reads the variable itself, it is only surfaced here.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
# How often a runtime process copies processor figures (mailbox depth, routes) into gauges.
METRICS_SAMPLE_INTERVAL_S = env.float("METRICS_SAMPLE_INTERVAL_S", default=1.0)
