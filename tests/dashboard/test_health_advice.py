"""Every component that is not healthy is shown with what it means and what to do."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from core.health import Status
from core.models import ComponentHealth
from dashboard.health_advice import health_advice


@pytest.mark.parametrize(
    ("component", "reason", "says"),
    [
        ("processor", "stopping with open positions: ema-1", "old route keeps running"),
        ("processor", "degraded with open positions: ema-1", "restart"),
        ("processor:signals", "falling behind: 3 queued", "CPU"),
        ("orders:executor", "broker paper unavailable: timeout", "broker did not answer"),
        ("feed:sim/trades", "reconnecting", "recovers on its own"),
        ("feed:sim/trades", "no subscribed instruments", "Add instruments"),
        ("recorder", "buffer full: 10 ticks dropped", "cannot keep up"),
        ("job:orders-reconcile", "last run failed: RuntimeError()", "traceback"),
        ("orders:reconciliation", "2 corrections left", "Orders needing a decision"),
        ("something-new", "a reason nobody wrote advice for", "Working, but only partly"),
    ],
)
def test_each_degraded_reason_has_advice(component: str, reason: str, says: str) -> None:
    assert says in health_advice(component, Status.DEGRADED, reason)


def test_blocked_has_advice_and_healthy_none() -> None:
    assert "Not working" in health_advice("x", Status.BLOCKED, "")
    assert health_advice("x", Status.HEALTHY, "ok") == ""


@pytest.mark.django_db
def test_the_health_panel_shows_the_reason_and_what_to_do() -> None:
    staff = get_user_model().objects.create_user("ops", password="pw-123456", is_staff=True)
    ComponentHealth.objects.create(
        component="processor",
        process="p1",
        status="DEGRADED",
        reason="stopping with open positions: ema-1",
        stale_after_s=60,
        updated_at=timezone.now(),
    )
    client = Client()
    client.force_login(staff)
    body = client.get("/dashboard/panels/health/").content.decode()
    assert "stopping with open positions: ema-1" in body
    assert 'class="advice"' in body and "old route keeps running" in body
