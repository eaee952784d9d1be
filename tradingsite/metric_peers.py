"""The process figures /internal/health sums: this process's plus its peers' endpoints (METRICS_PEERS).

Where every process is its own container (the compose deployment), a counter lives in
the process that counts it: the broker latency and lock contention in runfeed, the
reconciliation figures in the worker. A web process's /internal/health reads their
endpoints (runfeed's RUNTIME_METRICS_PORT, the worker's and beat's) at request time,
concurrently with a short timeout, and adds them to its own, so the counts it shows
are the site's. /metrics stays per process: Prometheus scrapes each endpoint itself.
"""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from core.metrics import multiprocess_dir

MAX_BODY_BYTES = 8 * 1024 * 1024  # a peer's answer beyond this is refused, not parsed


@dataclass(frozen=True)
class PeerResult:
    url: str
    ok: bool
    error: str = ""
    families: tuple[Metric, ...] = ()


def fetch_peer(url: str, timeout_s: float) -> PeerResult:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # operator-set http URLs
            body = response.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            return PeerResult(url, False, f"answer larger than {MAX_BODY_BYTES} bytes")
        return PeerResult(url, True, families=tuple(text_string_to_metric_families(body.decode())))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        # ValueError: a body that is not the Prometheus text format.
        return PeerResult(url, False, f"{type(exc).__name__}: {exc}")


def local_families() -> list[Metric]:
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return list(registry.collect())
    return list(REGISTRY.collect())


def merge(family_lists: list[list[Metric]]) -> list[Metric]:
    """One family per name, holding every list's samples (sums over them add the processes up)."""
    merged: dict[str, Metric] = {}
    for families in family_lists:
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            into.samples.extend(family.samples)
    return list(merged.values())


def gather(peers: list[str], timeout_s: float) -> tuple[list[Metric], list[PeerResult]]:
    results: list[PeerResult] = []
    if peers:
        with ThreadPoolExecutor(max_workers=min(8, len(peers))) as pool:
            results = list(pool.map(lambda url: fetch_peer(url, timeout_s), peers))
    families = merge([local_families(), *(list(r.families) for r in results if r.ok)])
    return families, results


def health_families() -> tuple[list[Metric] | None, list[dict[str, object]]]:
    """(families for the health report, what each peer answered); (None, []) without METRICS_PEERS."""
    if not settings.METRICS_PEERS:
        return None, []
    families, results = gather(settings.METRICS_PEERS, settings.METRICS_PEER_TIMEOUT_S)
    return families, [{"url": r.url, "ok": r.ok, "error": r.error} for r in results]
