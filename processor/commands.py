"""Route commands: the only way anything changes the routing snapshot.

They travel on an unbounded control queue to the route command loop. Every command
after Reconcile names the route incarnation it is about, so one aimed at a route that
has since been recreated is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from processor.specs import FeedSymbol, RouteKey, StrategySpec


@dataclass(frozen=True)
class Reconcile:
    desired: tuple[StrategySpec, ...]


@dataclass(frozen=True)
class Degrade:
    key: RouteKey
    route_instance_id: int
    cause: str


@dataclass(frozen=True)
class TeardownStrategy:
    key: RouteKey
    route_instance_id: int


@dataclass(frozen=True)
class InstrumentRouteAdded:
    key: RouteKey
    route_instance_id: int
    instrument: FeedSymbol


@dataclass(frozen=True)
class InstrumentRouteRemoved:
    key: RouteKey
    route_instance_id: int
    instrument: FeedSymbol


RouteCommand = Union[Reconcile, Degrade, TeardownStrategy, InstrumentRouteAdded, InstrumentRouteRemoved]
