"""Per-process Prometheus endpoints of the Celery processes and the site-wide figures' cache.

The web processes answer /metrics; runfeed has RUNTIME_METRICS_PORT (settings.runtime).
A Celery worker and beat each serve their own endpoint when their port is set (0 = off):
in a deployment where every process is its own container, each is scraped on its own.
"""

from __future__ import annotations

from tradingsite.settings.base import env

WORKER_METRICS_PORT = env.int("WORKER_METRICS_PORT", default=0)
WORKER_METRICS_ADDR = env.str("WORKER_METRICS_ADDR", default="127.0.0.1")
BEAT_METRICS_PORT = env.int("BEAT_METRICS_PORT", default=0)
BEAT_METRICS_ADDR = env.str("BEAT_METRICS_ADDR", default="127.0.0.1")
# The site-wide figures (database aggregates) are computed at most once per this many
# seconds per web process, however many scrapers and dashboards ask (0 = every time).
SITE_FIGURES_CACHE_S = env.float("SITE_FIGURES_CACHE_S", default=5.0)
