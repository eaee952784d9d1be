"""Per-process Prometheus endpoints of the Celery processes and the site-wide figures' cache.

The web processes answer /metrics; runfeed has RUNTIME_METRICS_PORT (settings.runtime).
A Celery worker and beat each serve their own endpoint when their port is set (0 = off):
in a deployment where every process is its own container, each is scraped on its own.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env

WORKER_METRICS_PORT = env.int("WORKER_METRICS_PORT", default=0)
WORKER_METRICS_ADDR = env.str("WORKER_METRICS_ADDR", default="127.0.0.1")
BEAT_METRICS_PORT = env.int("BEAT_METRICS_PORT", default=0)
BEAT_METRICS_ADDR = env.str("BEAT_METRICS_ADDR", default="127.0.0.1")
# The site-wide figures (database aggregates) are computed at most once per this many
# seconds per web process, however many scrapers and dashboards ask (0 = every time).
SITE_FIGURES_CACHE_S = env.float("SITE_FIGURES_CACHE_S", default=5.0)
# Peer endpoints (runfeed, worker, beat) whose figures a web process's /internal/health adds
# to its own counts, e.g. "http://runfeed:9100/metrics,http://worker:9101/metrics".
METRICS_PEERS = env.list("METRICS_PEERS", default=[])
METRICS_PEER_TIMEOUT_S = env.float("METRICS_PEER_TIMEOUT_S", default=1.0)
for _peer in METRICS_PEERS:
    if not _peer.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"METRICS_PEERS: {_peer!r} is not an http(s) URL")
# prometheus_client switches to its multi-process files when the variable is merely
# present: empty, it would write them into the working directory.
_multiproc = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # presence, not value: what the client tests
if _multiproc is not None and not os.path.isdir(_multiproc):
    raise ImproperlyConfigured(
        f"PROMETHEUS_MULTIPROC_DIR={_multiproc!r} is not a directory: unset it, or create it (empty) before the processes start"
    )
