"""The components a deployment must have: enabled feeds and scheduled jobs.

Health rows say what reported; this says what should have. A component that is expected
and never reported is listed (core.selectors) instead of vanishing, and the prune job
keeps the last word of every expected component (core.services.component_health_prune).
Scheduled jobs come from core.schedule; the apps above core add their own sources (the
composition root registers the enabled feeds), so core reads no app's models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.health import Status
from core.schedule import periodic_jobs, scheduled_interval_s


@dataclass(frozen=True)
class ExpectedComponent:
    component: str
    why: str  # "enabled feed", "scheduled job": shown next to a missing entry
    # Status of the entry while no process reports it; None = judged by `due_within_s`.
    missing_status: Status | None = Status.BLOCKED
    # A job is only late once it missed two runs since the deployment came up.
    due_within_s: float | None = None


ExpectedSource = Callable[[], Iterable[ExpectedComponent]]
_sources: list[ExpectedSource] = []


def register_expected_source(source: ExpectedSource) -> None:
    """Add a source of expected components (idempotent: the same source twice counts once)."""
    if source not in _sources:
        _sources.append(source)


def unregister_expected_source(source: ExpectedSource) -> None:
    if source in _sources:
        _sources.remove(source)


def scheduled_jobs() -> list[ExpectedComponent]:
    """Every declared periodic job, as the `job:<name>` component its runs report."""
    return [
        ExpectedComponent(f"job:{job.name}", "scheduled job", None, 2 * scheduled_interval_s(job))
        for job in periodic_jobs()
    ]


def expected_components() -> list[ExpectedComponent]:
    """Return the expected set: scheduled jobs plus every registered source, one entry per name."""
    found: dict[str, ExpectedComponent] = {}
    for source in [scheduled_jobs, *_sources]:
        for entry in source():
            found.setdefault(entry.component, entry)
    return sorted(found.values(), key=lambda e: e.component)
