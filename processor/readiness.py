"""The processor's readiness and health, from what its core jobs and strategies are doing.

| condition                                   | ready | health   |
| no core jobs                                | no    | INACTIVE |
| a core job not running                      | no    | BLOCKED  |
| a degraded route with open positions        | no    | BLOCKED  |
| a degraded route without open positions     | yes   | DEGRADED |
| a stopping route (positions winding down)   | yes   | DEGRADED |
| all routes active                           | yes   | HEALTHY  |

Feed batches shed at the processor's input are named in the reason; the routes they
concerned are degraded, so the status follows from the routes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from core.health import Status
from processor.routing import Degraded, Stopping, StrategyRoute


class ProcessorHealth(StrEnum):
    INACTIVE = "INACTIVE"
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    BLOCKED = "BLOCKED"

    @property
    def board_status(self) -> Status:
        """The HealthBoard has no INACTIVE: a processor that is not running is not working."""
        return Status.BLOCKED if self is ProcessorHealth.INACTIVE else Status(self.value)


@dataclass(frozen=True)
class Readiness:
    ready: bool
    health: ProcessorHealth
    reason: str


def processor_readiness(
    core_jobs: Mapping[str, bool],
    routes: Iterable[StrategyRoute],
    *,
    shed_batches: int = 0,
    shed_events: int = 0,
) -> Readiness:
    """Return readiness from whether each core job is running and the routes' states."""
    readiness = _route_readiness(core_jobs, routes)
    if shed_batches:
        shed = f"input shed {shed_batches} feed batches ({shed_events} events)"
        return Readiness(readiness.ready, readiness.health, f"{readiness.reason}; {shed}")
    return readiness


def _route_readiness(core_jobs: Mapping[str, bool], routes: Iterable[StrategyRoute]) -> Readiness:
    if not core_jobs:
        return Readiness(False, ProcessorHealth.INACTIVE, "no core jobs")
    stopped = sorted(name for name, running in core_jobs.items() if not running)
    if stopped:
        return Readiness(False, ProcessorHealth.BLOCKED, f"core job not running: {', '.join(stopped)}")
    routes = list(routes)
    lost = sorted(r.spec.name for r in routes if isinstance(r.state, Degraded) and r.state.has_open_positions)
    if lost:
        return Readiness(False, ProcessorHealth.BLOCKED, f"degraded with open positions: {', '.join(lost)}")
    degraded = sorted(f"{r.spec.name} ({r.state.cause})" for r in routes if isinstance(r.state, Degraded))
    stopping = sorted(
        f"{r.spec.name} (keeps {', '.join(sorted(symbol for _, symbol in r.state.retained)) or 'its positions'} "
        "until its own exit or until the position is closed, e.g. by hand in Manual control)"
        for r in routes
        if isinstance(r.state, Stopping)
    )
    reasons = []
    if degraded:
        reasons.append(f"degraded: {', '.join(degraded)}")
    if stopping:
        reasons.append(f"stopping with open positions: {', '.join(stopping)}")
    if reasons:
        return Readiness(True, ProcessorHealth.DEGRADED, "; ".join(reasons))
    return Readiness(True, ProcessorHealth.HEALTHY, f"{len(routes)} routes active")
