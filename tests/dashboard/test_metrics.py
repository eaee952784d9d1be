"""Prometheus metrics: every required family is exported, parses, and adds up across processes."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from core import metrics as core_metrics
from core.health import HealthBoard, Status
from core.health_report import build_report
from core.jobs import periodic_job
from core.selectors import ComponentView
from tradingsite import metrics

ROOT = Path(__file__).resolve().parents[2]


def families(text: str) -> dict[str, object]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


@pytest.mark.django_db
def test_metrics_endpoint_parses_and_carries_every_required_family(client: Client, settings) -> None:
    settings.METRICS_TOKEN = "scrape-me"
    assert client.get("/metrics").status_code == 403
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me")
    assert response.status_code == 200
    exported = families(response.content.decode())
    missing = sorted(set(metrics.REQUIRED_FAMILIES) - set(exported))
    assert not missing, f"not exported: {missing}"
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


def test_health_transitions_count_reconnects_and_breaker_state() -> None:
    board = HealthBoard()
    board.listeners.append(metrics.observe_health_change)
    component = "feed:unit-test/trades"
    before = metrics.FEED_RECONNECTS.labels(component)._value.get()
    board.set(component, Status.HEALTHY, "streaming")
    board.set(component, Status.DEGRADED, "reconnecting")
    board.set(component, Status.DEGRADED, "reconnecting")  # no change: not another reconnect
    board.set(component, Status.HEALTHY, "streaming")
    board.set(component, Status.BLOCKED, "breaker open after 10 failures")
    assert metrics.FEED_RECONNECTS.labels(component)._value.get() - before == 2
    assert metrics.BREAKER_OPEN.labels(component)._value.get() == 1
    assert metrics.COMPONENT_STATUS.labels(component)._value.get() == 2


@pytest.mark.django_db
def test_a_periodic_job_records_its_duration_and_last_run() -> None:
    from core.schedule import unregister_periodic_job
    from tradingsite.celery import app as celery_app

    # Configure Celery first: configuring copies the declared jobs into its beat schedule,
    # which must not keep this probe once it is unregistered.
    assert "metrics-probe-job" not in celery_app.conf.beat_schedule
    name = "metrics-probe-job"
    count_before = sum(
        s.value
        for s in core_metrics.JOB_DURATION.collect()[0].samples
        if s.name.endswith("_count") and s.labels["job"] == name
    )

    @periodic_job(name, every_s=60.0)
    def job() -> str:
        return "done"

    try:
        job()
    finally:
        unregister_periodic_job(name)
    samples = core_metrics.JOB_DURATION.collect()[0].samples
    assert sum(s.value for s in samples if s.name.endswith("_count") and s.labels["job"] == name) == count_before + 1
    last_run = core_metrics.JOB_LAST_RUN.labels(name, "ok")._value.get()
    assert abs(last_run - timezone.now().timestamp()) < 60


def test_processes_sharing_a_multiprocess_dir_add_up_on_the_web_endpoint(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "METRICS_TOKEN": "scrape-me",
        "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
        "VAR_DIR": str(tmp_path / "var"),
    }
    env.pop("DATABASE_URL", None)
    bump = (
        "from tradingsite import metrics; from dashboard.metrics import WS_CONNECTIONS; "
        "metrics.FEED_RECONNECTS.labels('feed:mp/trades').inc(); WS_CONNECTIONS.inc()"
    )
    for _ in range(2):  # two runtime processes, each its own pid
        subprocess.run([sys.executable, "-c", bump], cwd=ROOT, env=env, check=True, timeout=60)
    scrape = (
        "import django; django.setup(); from django.test import Client; "
        "print(Client().get('/metrics', HTTP_AUTHORIZATION='Bearer scrape-me', HTTP_HOST='127.0.0.1').content.decode())"
    )
    text = subprocess.run(
        [sys.executable, "-c", scrape], cwd=ROOT, env=env, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    assert sample(text, "feed_reconnects_total", component="feed:mp/trades") == 2
    # Answering for every process of the directory, the web process labels them role "host".
    assert sample(text, "feed_reconnects_total", component="feed:mp/trades", role="host") == 2
    # A live-sum gauge counts only processes still alive: both bumpers have exited
    # without being marked dead, so their values stay until mark_process_dead.
    assert sample(text, "dashboard_websockets_open") == 2


def _view(component: str, status: Status, age_s: float = 1.0) -> ComponentView:
    now = timezone.now()
    return ComponentView(component, status, "", "p1", now - timedelta(seconds=age_s), age_s)


def test_internal_health_fields_follow_seed_003() -> None:
    registry = CollectorRegistry()
    violations = Counter("orders_capital_invariant_violations", "x", registry=registry)
    contention = Counter("orders_lock_contention", "x", ["scope"], registry=registry)
    contention.labels("entry").inc(3)
    contention.labels("reconcile").inc(1)
    components = [
        _view("orders:executor", Status.HEALTHY),
        _view("processor", Status.HEALTHY),
        _view("job:orders-reconcile", Status.HEALTHY),
        _view("feed:sim", Status.HEALTHY),
    ]
    report = build_report(
        database_ok=True, database_reason="ok", components=components, families=list(registry.collect())
    )
    assert report["status"] == "HEALTHY" and report["readiness"] is True
    assert (report["tradingLoopHealthy"], report["monitorLoopHealthy"], report["reconciliationLoopHealthy"]) == (
        True,
        True,
        True,
    )
    assert report["lockContentionCount"] == 4 and report["capitalInvariantViolations"] == 0
    assert report["reconciliationLastRun"] is not None
    assert report["feeds"] == {"feed:sim": {"status": "HEALTHY", "reason": ""}}

    # The reconcile job missed two runs (its report went stale: DEGRADED) and the ledger broke once.
    violations.inc()
    components[2] = _view("job:orders-reconcile", Status.DEGRADED, age_s=200)
    report = build_report(
        database_ok=True, database_reason="ok", components=components, families=list(registry.collect())
    )
    assert report["status"] == "DEGRADED" and report["ready"] is True
    assert report["reconciliationLoopHealthy"] is False and report["readiness"] is False
    assert report["capitalInvariantViolations"] == 1


def test_a_loop_this_deployment_does_not_run_is_null_not_failing() -> None:
    report = build_report(database_ok=True, database_reason="ok", components=[], families=[])
    assert (
        report["tradingLoopHealthy"] is None and report["readiness"] is True and report["reconciliationLastRun"] is None
    )


@pytest.mark.embedded_site  # the runfeed process runs on its own VAR_DIR's SQLite in every pass
def test_a_runfeed_process_serves_its_own_metrics_endpoint(tmp_path: Path) -> None:
    import socket
    import urllib.request

    from tests.helpers import eventually

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR")
    }
    env.update(
        {"VAR_DIR": str(tmp_path / "var"), "RUNTIME_METRICS_PORT": str(port), "DEMO_PASSWORD": "pw-long-enough-123"}
    )
    from tests.helpers_migrated import migrated_var_dir

    migrated_var_dir(env["VAR_DIR"])
    subprocess.run(
        [sys.executable, "manage.py", "loaddemo"], cwd=ROOT, env=env, check=True, timeout=180, capture_output=True
    )
    feed = subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def scrape() -> str | None:
            assert feed.poll() is None, "runfeed exited early"
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                return None
            return text if 'feed_ticks_received_total{feed="sim"' in text and 'component="feed:sim"' in text else None

        text = eventually(scrape, timeout_s=60, interval_s=0.5)
        exported = families(text)
        assert not sorted(set(metrics.REQUIRED_FAMILIES) - set(exported))
        assert sample(text, "feed_ticks_received_total", venue="simulated", feed="sim") > 0
        assert sample(text, "runtime_component_status", component="feed:sim") == 0  # HEALTHY
    finally:
        feed.terminate()
        feed.wait(timeout=30)
