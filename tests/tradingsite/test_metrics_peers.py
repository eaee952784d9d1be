"""/internal/health adds its peers' counters (METRICS_PEERS) to its own: the site's counts, not one process's.

The peer is a real process serving its endpoint the way runfeed, the worker and beat do
(tradingsite.process_metrics); it records broker latency and lock contention as the
trading runtime does.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client import REGISTRY

from tests.helpers import eventually
from tradingsite.metric_peers import merge
from tradingsite.site_figures import forget_cached

ROOT = Path(__file__).resolve().parents[2]

PEER = """
import time, django
django.setup()
from orders import metrics
from tradingsite.process_metrics import serve_process_metrics
for seconds in (0.01, 0.02, 0.3):
    metrics.BROKER_LATENCY.labels("paper", "place").observe(seconds)
metrics.LOCK_CONTENTION.labels("entry").inc(5)
assert serve_process_metrics("runfeed", int(__import__("sys").argv[1]), "127.0.0.1")
time.sleep(600)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
    env.update({"DJANGO_SETTINGS_MODULE": "tradingsite.settings", "VAR_DIR": str(tmp_path / "var")})
    process = subprocess.Popen([sys.executable, "-c", PEER, str(port)], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}/metrics"

    def up() -> bool:
        assert process.poll() is None, "the peer exited"
        try:
            return b"orders_broker_latency_seconds" in urllib.request.urlopen(url, timeout=2).read()
        except OSError:
            return False

    try:
        eventually(up, timeout_s=60, interval_s=0.25)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _health(client: Client) -> dict:  # type: ignore[type-arg]
    client.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    forget_cached()
    response = client.get("/internal/health")
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def _local(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.django_db
def test_health_counts_are_this_process_plus_its_peers(client: Client, settings, peer: str) -> None:  # type: ignore[no-untyped-def]
    dead = f"http://127.0.0.1:{_free_port()}/metrics"  # nothing listens there
    settings.METRICS_PEERS = [peer, dead]
    local_count = sum(
        s.value
        for family in REGISTRY.collect()
        if family.name == "orders_broker_latency_seconds"
        for s in family.samples
        if s.name.endswith("_count")
    )
    local_contention = sum(
        _local("orders_lock_contention_total", scope=scope) for scope in ("entry", "reconcile", "exit")
    )
    body = _health(client)
    histogram = body["exchangeLatencyHistogram"]
    assert histogram["count"] == local_count + 3
    assert histogram["buckets"]["+Inf"] >= 3 and histogram["sum_s"] >= 0.329
    assert body["lockContentionCount"] >= local_contention + 5
    peers = {p["url"]: p for p in body["siteFigures"]["metricPeers"]}
    assert peers[peer] == {"url": peer, "ok": True, "error": ""}
    assert peers[dead]["ok"] is False and "URLError" in peers[dead]["error"]


@pytest.mark.django_db
def test_without_peers_the_counts_are_this_process_only(client: Client, settings, peer: str) -> None:  # type: ignore[no-untyped-def]
    settings.METRICS_PEERS = []
    body = _health(client)
    local_count = sum(
        s.value
        for family in REGISTRY.collect()
        if family.name == "orders_broker_latency_seconds"
        for s in family.samples
        if s.name.endswith("_count")
    )
    assert body["exchangeLatencyHistogram"]["count"] == local_count  # the peer's 3 are not seen
    assert body["siteFigures"]["metricPeers"] == []


def test_merge_keeps_every_processes_samples_under_one_family() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    a = list(text_string_to_metric_families('# TYPE x_total counter\nx_total{role="runfeed"} 2\n'))
    b = list(text_string_to_metric_families('# TYPE x_total counter\nx_total{role="worker"} 3\n'))
    [family] = merge([a, b])
    assert sum(s.value for s in family.samples) == 5
