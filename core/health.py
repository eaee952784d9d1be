"""Component health: HEALTHY (working), DEGRADED (working, partly), BLOCKED (not working).

Each runtime process keeps a HealthBoard of its own components and reports it to the
database on an interval (core.services.component_health_report), so the web
processes can answer /readyz and /internal/health for every process, embedded or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
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


class HealthBoard:
    """The health of one process's components; each component is written by its owner only."""

    def __init__(self) -> None:
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
