"""What a web process's /metrics answers: its own figures (role web) plus the site-wide ones.

With PROMETHEUS_MULTIPROC_DIR the process figures are those of every process writing
to the directory (role host: the processes of one host, summed per the gauges' modes).
The `site_*` families come from the database (tradingsite.site_collector) and carry no
role: they are the site's, the same on every web process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from core.metrics import multiprocess_dir
from tradingsite.process_metrics import RoleLabelled, process_source
from tradingsite.site_collector import SiteFiguresCollector


def web_role() -> str:
    return "host" if multiprocess_dir() else "web"


def web_metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RoleLabelled(process_source(), web_role()))
    registry.register(SiteFiguresCollector())
    return registry
