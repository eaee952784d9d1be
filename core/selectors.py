"""Read paths of component health: each report with its staleness applied, per process.

Rows are per (process, component). A stale row of a process that a later process took
over (a restart with the same role and label, or a later report of the same expected
component) is `superseded`: still listed, no longer counted. An expected component
(core.expected) that no process reports is listed as `missing`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.expected import ExpectedComponent, expected_components
from core.health import Status
from core.models import ComponentHealth

# The rows periodic jobs write, whichever worker ran them (core.jobs).
JOBS_PROCESS = "periodic-jobs"


@dataclass(frozen=True)
class ComponentView:
    component: str
    status: Status
    reason: str
    process: str
    # For a missing entry, the time of the verdict (nothing reported); see `missing`.
    updated_at: datetime
    age_s: float
    role: str = ""
    label: str = ""
    host: str = ""
    pid: int | None = None
    started_at: datetime | None = None
    fresh: bool = True  # refreshed within its limit
    expected: bool = False
    missing: bool = False  # expected, and no process reports it
    superseded: bool = False  # stale, and a later process took it over: not counted

    @property
    def counts(self) -> bool:
        """Whether this entry takes part in the overall status."""
        return not self.superseded

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "status": self.status.value,
            "reason": self.reason,
            "process": self.process,
            "role": self.role,
            "label": self.label,
            "host": self.host,
            "pid": self.pid,
            "updated_at": None if self.missing else self.updated_at.isoformat(),
            "age_s": None if self.missing else round(self.age_s, 3),
            "expected": self.expected,
            "missing": self.missing,
            "superseded": self.superseded,
        }


@dataclass(frozen=True)
class ProcessView:
    process: str
    role: str
    label: str
    host: str
    pid: int | None
    started_at: datetime | None
    last_seen: datetime
    age_s: float
    live: bool  # at least one of its reports is fresh
    superseded: bool  # every one of its reports is superseded
    components: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "process": self.process,
            "role": self.role,
            "label": self.label,
            "host": self.host,
            "pid": self.pid,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "last_seen": self.last_seen.isoformat(),
            "age_s": round(self.age_s, 3),
            "live": self.live,
            "superseded": self.superseded,
            "components": self.components,
        }


def _role(row: ComponentHealth) -> str:
    return row.role or ("jobs" if row.process == JOBS_PROCESS else "")


class _Latest:
    """The newest report per duty (role, label) and per component, to judge supersession."""

    def __init__(self, rows: list[ComponentHealth]) -> None:
        self.by_duty: dict[tuple[str, str], list[ComponentHealth]] = {}
        self.by_component: dict[str, list[ComponentHealth]] = {}
        for row in rows:
            if row.label:
                self.by_duty.setdefault((row.role, row.label), []).append(row)
            self.by_component.setdefault(row.component, []).append(row)

    def superseded(self, row: ComponentHealth, expected: set[str]) -> bool:
        def later(other: ComponentHealth) -> bool:
            return other.process != row.process and other.updated_at > row.updated_at

        if row.label and any(later(o) for o in self.by_duty.get((row.role, row.label), [])):
            return True  # the same duty, restarted
        # The same component of a deployment-wide name, now reported elsewhere; rows from
        # before processes had identities only match this way.
        if row.component in expected or not row.role:
            return any(later(o) for o in self.by_component.get(row.component, []))
        return False


def component_health_effective(
    *, now: datetime | None = None, expected: Iterable[ExpectedComponent] | None = None
) -> list[ComponentView]:
    """Return every reported component and every expected one nobody reports.

    A report older than its limit takes its stale status. `expected` defaults to the
    deployment's expected set (core.expected).
    """
    now = now or timezone.now()
    wanted = {e.component: e for e in (expected_components() if expected is None else expected)}
    rows = list(ComponentHealth.objects.all())
    fresh = {row.pk: (now - row.updated_at).total_seconds() <= row.stale_after_s for row in rows}
    latest, wanted_names = _Latest(rows), set(wanted)
    views = []
    for row in rows:
        age_s = (now - row.updated_at).total_seconds()
        status, reason = Status(row.status), row.reason
        if not fresh[row.pk]:
            status = Status(row.stale_status)
            reason = f"no report for {age_s:.0f}s (last: {row.status} {row.reason})"
        superseded = not fresh[row.pk] and latest.superseded(row, wanted_names)
        views.append(
            ComponentView(
                row.component,
                status,
                reason,
                row.process,
                row.updated_at,
                age_s,
                role=_role(row),
                label=row.label,
                host=row.host,
                pid=row.pid,
                started_at=row.started_at,
                fresh=fresh[row.pk],
                expected=row.component in wanted,
                superseded=superseded,
            )
        )
    reported = {row.component for row in rows}
    live_since = [row.started_at for row in rows if fresh[row.pk] and row.started_at]
    up_s = (now - min(live_since)).total_seconds() if live_since else 0.0
    for entry in wanted.values():
        if entry.component not in reported:
            views.append(_missing(entry, now, up_s))
    views.sort(key=lambda v: (v.component, v.superseded, -v.updated_at.timestamp()))
    return views


def _missing(entry: ExpectedComponent, now: datetime, up_s: float) -> ComponentView:
    if entry.missing_status is not None:
        status, reason = entry.missing_status, f"no process ({entry.why})"
    elif entry.due_within_s is not None and up_s > entry.due_within_s:
        status, reason = (
            Status.DEGRADED,
            f"no process has reported a run ({entry.why}, due within {entry.due_within_s:.0f}s)",
        )
    else:
        status, reason = Status.HEALTHY, f"waiting for its first run ({entry.why})"
    return ComponentView(entry.component, status, reason, "", now, 0.0, fresh=False, expected=True, missing=True)


def process_views(views: Iterable[ComponentView]) -> list[ProcessView]:
    """Group the reported entries by process: identity, role, last seen, liveness."""
    by_process: dict[str, list[ComponentView]] = {}
    for view in views:
        if not view.missing:
            by_process.setdefault(view.process, []).append(view)
    processes = []
    for key, group in by_process.items():
        latest = min(group, key=lambda v: v.age_s)
        processes.append(
            ProcessView(
                key,
                latest.role,
                latest.label,
                latest.host,
                latest.pid,
                latest.started_at,
                latest.updated_at,
                latest.age_s,
                live=any(v.fresh for v in group),
                superseded=all(v.superseded for v in group),
                components=len(group),
            )
        )
    processes.sort(key=lambda p: (p.superseded, p.role, p.label, p.process))
    return processes
