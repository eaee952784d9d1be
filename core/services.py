"""Write paths of component health: each process's reports, their withdrawal and pruning."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core.health import Health
from core.models import ComponentHealth


def component_health_report(*, process: str, health: dict[str, Health], default_stale_after_s: float) -> None:
    """Upsert this process's component reports and drop its components that went away."""
    now = timezone.now()
    with transaction.atomic():
        for component, report in health.items():
            ComponentHealth.objects.update_or_create(
                component=component,
                defaults={
                    "process": process,
                    "status": report.status.value,
                    "reason": report.reason[:2000],
                    "stale_after_s": report.stale_after_s or default_stale_after_s,
                    "stale_status": report.stale_status.value,
                    "updated_at": now,
                },
            )
        ComponentHealth.objects.filter(process=process).exclude(component__in=health).delete()


def component_health_withdraw(*, process: str) -> None:
    """Remove every report of a process that is stopping cleanly."""
    ComponentHealth.objects.filter(process=process).delete()


def component_health_prune(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Delete reports nobody refreshed for `older_than` (a process that died long ago)."""
    cutoff = (now or timezone.now()) - older_than
    deleted, _ = ComponentHealth.objects.filter(updated_at__lt=cutoff).delete()
    return deleted
