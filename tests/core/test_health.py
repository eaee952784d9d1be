"""Reported component health drives /readyz and /internal/health; stale reports count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from core import services
from core.health import Health, HealthBoard, Status, worst
from core.models import ComponentHealth
from core.selectors import component_health_effective

pytestmark = pytest.mark.django_db


def report(process: str, **components: Health) -> None:
    services.component_health_report(process=process, health=components, default_stale_after_s=15)


def test_degraded_component_keeps_readiness_and_blocked_fails_it(client: Client) -> None:
    report("p1", **{"feed:a": Health(Status.DEGRADED, "no subscribed instruments")})
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert b"feed:a: DEGRADED no subscribed instruments" in ready.content
    report("p1", **{"feed:a": Health(Status.BLOCKED, "breaker open: 10 refusals")})
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503
    assert b"feed:a: BLOCKED breaker open: 10 refusals" in not_ready.content


def test_a_report_nobody_refreshes_turns_into_its_stale_status() -> None:
    report("p1", **{"feed:a": Health(Status.HEALTHY, "streaming")})
    later = timezone.now() + timedelta(seconds=16)
    (view,) = component_health_effective(now=later)
    assert view.status is Status.BLOCKED
    assert "no report for 16s" in view.reason


def test_a_process_report_replaces_its_previous_components_only() -> None:
    report("p1", **{"feed:a": Health(Status.HEALTHY), "feed:b": Health(Status.HEALTHY)})
    report("p2", **{"feed:c": Health(Status.HEALTHY)})
    report("p1", **{"feed:a": Health(Status.HEALTHY)})
    assert set(ComponentHealth.objects.values_list("component", flat=True)) == {"feed:a", "feed:c"}
    services.component_health_withdraw(process="p1")
    assert set(ComponentHealth.objects.values_list("component", flat=True)) == {"feed:c"}


def test_prune_deletes_only_long_dead_reports() -> None:
    report("p1", **{"feed:a": Health(Status.HEALTHY)})
    assert services.component_health_prune(older_than=timedelta(hours=1)) == 0
    assert services.component_health_prune(older_than=timedelta(hours=1), now=timezone.now() + timedelta(hours=2)) == 1


def test_internal_health_lists_components_with_the_worst_status(client: Client) -> None:
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    client.force_login(staff)
    report("p1", **{"feed:a": Health(Status.DEGRADED, "lagging"), "runtime:site": Health(Status.HEALTHY)})
    body = client.get("/internal/health").json()
    assert body["status"] == "DEGRADED" and body["ready"] is True
    assert [(c["component"], c["status"], c["reason"]) for c in body["components"]] == [
        ("feed:a", "DEGRADED", "lagging"),
        ("runtime:site", "HEALTHY", ""),
    ]


def test_board_and_worst() -> None:
    board = HealthBoard()
    board.set("x", Status.DEGRADED, "why")
    assert board.get("x") == Health(Status.DEGRADED, "why")
    board.remove("x")
    assert board.snapshot() == {}
    assert worst([]) is Status.HEALTHY
    assert worst([Status.HEALTHY, Status.BLOCKED, Status.DEGRADED]) is Status.BLOCKED
