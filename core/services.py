"""Write paths of component health: each process's reports, their withdrawal and pruning."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core.health import Health, ProcessIdentity
from core.models import ComponentHealth


def _identity(process: ProcessIdentity | str) -> ProcessIdentity:
    # A bare string is a process known only by its key (tests, older callers).
    return process if isinstance(process, ProcessIdentity) else ProcessIdentity("", 0, process)


def _key(process: ProcessIdentity | str) -> str:
    return process.key if isinstance(process, ProcessIdentity) else process


def component_health_report(
    *,
    process: ProcessIdentity | str,
    health: dict[str, Health],
    default_stale_after_s: float,
    now: datetime | None = None,
) -> None:
    """Upsert this process's component reports and drop its components that went away."""
    identity = _identity(process)
    now = now or timezone.now()
    with transaction.atomic():
        for component, report in health.items():
            ComponentHealth.objects.update_or_create(
                process=_key(process),
                component=component,
                defaults={
                    "role": identity.role,
                    "label": identity.label[:200],
                    "host": identity.host[:200],
                    "pid": identity.pid or None,
                    "started_at": identity.started_at if identity.host else None,
                    "status": report.status.value,
                    "reason": report.reason[:2000],
                    "stale_after_s": report.stale_after_s or default_stale_after_s,
                    "stale_status": report.stale_status.value,
                    "updated_at": now,
                },
            )
        ComponentHealth.objects.filter(process=_key(process)).exclude(component__in=health).delete()


def component_health_withdraw(*, process: ProcessIdentity | str) -> None:
    """Remove every report of a process that is stopping cleanly."""
    ComponentHealth.objects.filter(process=_key(process)).delete()


def component_health_prune(*, older_than: timedelta, expected: Iterable[str], now: datetime | None = None) -> int:
    """Delete the reports of processes that are gone and whose evidence nobody needs.

    A process is gone when none of its rows was refreshed for `older_than`. Its rows are
    kept while one of them is the latest report of an `expected` component (an enabled
    feed, a scheduled job): that row is the proof the component is dead, and deleting it
    would turn a dead feed into a missing line. Once a later process reports every such
    component (a restart), or the component is no longer expected, the rows go.
    """
    cutoff = (now or timezone.now()) - older_than
    expected = set(expected)
    with transaction.atomic():
        last_seen = dict(
            ComponentHealth.objects.values_list("process")
            .annotate(seen=Max("updated_at"))
            .values_list("process", "seen")
        )
        gone = {process for process, seen in last_seen.items() if seen < cutoff}
        if not gone:
            return 0
        latest_of: dict[str, tuple[datetime, str]] = {}
        for component, process, updated_at in ComponentHealth.objects.filter(component__in=expected).values_list(
            "component", "process", "updated_at"
        ):
            known = latest_of.get(component)
            if known is None or (updated_at, process) > known:
                latest_of[component] = (updated_at, process)
        evidence = {process for _, process in latest_of.values()}
        # updated_at too: a process that reported again meanwhile keeps its rows.
        deleted, _ = ComponentHealth.objects.filter(process__in=gone - evidence, updated_at__lt=cutoff).delete()
    return deleted
