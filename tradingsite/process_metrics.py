"""One process's Prometheus figures, labelled with its role, and the endpoint that serves them.

Every process of a deployment is scraped on its own (web on /metrics, runfeed, the
Celery worker and beat on their METRICS port): each sample carries `role` (web,
runfeed, worker, beat) so a dashboard sums or splits them without relying on the
scrape configuration. Where PROMETHEUS_MULTIPROC_DIR is set, the figures are those of
every process writing to that directory (a prefork worker's pool children, or all the
processes of one host), read from the files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess, start_http_server
from prometheus_client.metrics_core import Metric

from core.metrics import multiprocess_dir

log = logging.getLogger(__name__)

ROLE_LABEL = "role"


class _Source(Protocol):
    def collect(self) -> Iterable[Metric]: ...


def process_source() -> _Source:
    """This process's figures, or with a multi-process directory every writer's, summed per the gauges' modes."""
    path = multiprocess_dir()
    if path:
        return multiprocess.MultiProcessCollector(None, path=path)
    return REGISTRY


class RoleLabelled:
    """A collector that re-exports another's families with `role` added to every sample."""

    def __init__(self, source: _Source, role: str) -> None:
        self._source = source
        self._role = role

    def collect(self) -> Iterator[Metric]:
        for family in self._source.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            out.samples = [s._replace(labels={**s.labels, ROLE_LABEL: self._role}) for s in family.samples]
            yield out


def role_registry(role: str) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RoleLabelled(process_source(), role))
    return registry


def serve_process_metrics(role: str, port: int, addr: str) -> bool:
    """Serve this process's figures on http://addr:port/metrics in a thread; False when off or the port is taken."""
    if not port:
        return False
    try:
        start_http_server(port, addr=addr, registry=role_registry(role))
    except OSError as exc:
        # A metrics port already taken must not stop a worker from working: say so once.
        log.error("metrics: %s cannot serve its endpoint on %s:%s: %s", role, addr, port, exc)
        return False
    log.info("metrics: %s serves Prometheus metrics on http://%s:%s/metrics", role, addr, port)
    return True
