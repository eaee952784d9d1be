"""Component health: HEALTHY (working), DEGRADED (working, partly), BLOCKED (not working).

Each runtime process keeps a HealthBoard of its own components and reports it to the
database on an interval (core.services.component_health_report), keyed by the board's
ProcessIdentity: two processes that both run a `processor` keep a row each, and the
web's /internal/health shows every process (core.selectors).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum


class Status(StrEnum):
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    BLOCKED = "BLOCKED"

    @property
    def allows_readiness(self) -> bool:
        return self is not Status.BLOCKED


@dataclass(frozen=True, slots=True)
class Health:
    status: Status
    reason: str = ""
    # How long the report stays believable; past it the web treats it as `stale_status`.
    stale_after_s: float | None = None
    stale_status: Status = Status.BLOCKED


# The kinds of process a deployment runs; "site" is the embedded web + runtime process,
# "jobs" the periodic jobs' own rows (whichever worker ran the job last).
PROCESS_ROLES = ("site", "web", "runfeed", "worker", "beat", "jobs")


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """Who reports: host and pid, an id unique to this start, the role and what it runs.

    `label` names the duty ("feed:binance", "site"): a later process with the same role
    and label is the restart of an earlier one and supersedes its reports.
    """

    host: str
    pid: int
    instance: str
    role: str = ""
    label: str = ""
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def key(self) -> str:
        return f"{self.host}:{self.pid}:{self.instance}"

    @classmethod
    def of_this_process(cls, *, role: str = "", label: str = "", instance: str | None = None) -> ProcessIdentity:
        return cls(socket.gethostname(), os.getpid(), instance or uuid.uuid4().hex[:12], role, label)

    def with_role(self, role: str, label: str = "") -> ProcessIdentity:
        return replace(self, role=role, label=label)


class HealthBoard:
    """The health of one process's components; each component is written by its owner only.

    `process` is who reports the board; components never name it, the reporter adds it.
    """

    def __init__(self, process: ProcessIdentity | None = None) -> None:
        self.process = process or ProcessIdentity.of_this_process()
        self._health: dict[str, Health] = {}
        self._changed_at: dict[str, float] = {}
        # Called on every change with (component, before, after); the metrics wiring
        # counts transitions here, where none can be missed between two samples.
        self.listeners: list[Callable[[str, Health | None, Health], None]] = []

    def set(self, component: str, status: Status, reason: str = "", **options: object) -> None:
        health = Health(status, reason, **options)  # type: ignore[arg-type]
        before = self._health.get(component)
        self._health[component] = health
        if before != health:
            self._changed_at[component] = time.time()
            for listener in self.listeners:
                listener(component, before, health)

    def remove(self, component: str) -> None:
        self._health.pop(component, None)
        self._changed_at.pop(component, None)

    def get(self, component: str) -> Health | None:
        return self._health.get(component)

    def snapshot(self) -> dict[str, Health]:
        return dict(self._health)


def worst(statuses: list[Status]) -> Status:
    """Return the least healthy of `statuses` (HEALTHY when empty)."""
    order = [Status.HEALTHY, Status.DEGRADED, Status.BLOCKED]
    return max(statuses, key=order.index, default=Status.HEALTHY)
