"""Read paths of component health: each report with its staleness applied."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from core.health import Status
from core.models import ComponentHealth


@dataclass(frozen=True)
class ComponentView:
    component: str
    status: Status
    reason: str
    process: str
    updated_at: datetime
    age_s: float


def component_health_effective(*, now: datetime | None = None) -> list[ComponentView]:
    """Return every reported component; a report older than its limit takes its stale status."""
    now = now or timezone.now()
    views = []
    for row in ComponentHealth.objects.all():
        age_s = (now - row.updated_at).total_seconds()
        status, reason = Status(row.status), row.reason
        if age_s > row.stale_after_s:
            status = Status(row.stale_status)
            reason = f"no report for {age_s:.0f}s (last: {row.status} {row.reason})"
        views.append(ComponentView(row.component, status, reason, row.process, row.updated_at, age_s))
    return views
