"""The processor's routing state: routes, route states and the immutable snapshot.

Only the route command loop builds snapshots; every change produces a new one, so the
feed router reads a consistent view without locks. Maps are read-only proxies over
dicts that are never touched after construction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Union

from feeds.market import MarketData
from processor.mailbox import Mailbox
from processor.specs import FeedSymbol, RouteKey, StrategySpec
from processor.strategy_executor import StrategyDelivery, StrategyExecutor


@dataclass(frozen=True)
class Active:
    pass


@dataclass(frozen=True)
class Stopping:
    """Removed from the repository, still running its instruments with open positions."""

    retained: frozenset[FeedSymbol]


@dataclass(frozen=True)
class Degraded:
    cause: str
    degraded_at_ns: int
    has_open_positions: bool


RouteState = Union[Active, Stopping, Degraded]


@dataclass(frozen=True)
class StrategyRoute:
    key: RouteKey
    spec: StrategySpec
    route_instance_id: int  # the incarnation: a re-added strategy gets a new one
    mailbox: Mailbox[StrategyDelivery]
    executor: StrategyExecutor
    state: RouteState
    jobs: tuple[asyncio.Task[None], ...] = ()  # route-side jobs (the stopping watcher)


# What the feed router needs per target: (route key, route instance id, strategy mailbox).
RouteTarget = tuple[RouteKey, int, "Mailbox[StrategyDelivery]"]


# The routes of one feed that trade exactly the same symbols: a feed batch is cut into
# per-symbol chunks once for all of them, and each gets those chunks as one mailbox item.
DeliveryGroup = tuple[frozenset[str], tuple[RouteTarget, ...]]


@dataclass(frozen=True)
class RoutingSnapshot:
    desired: tuple[StrategySpec, ...] = ()
    # feed -> venue symbol -> targets; Degraded routes are never in it.
    routes_by_instrument: Mapping[str, Mapping[str, tuple[RouteTarget, ...]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    routes_by_strategy: Mapping[RouteKey, StrategyRoute] = field(default_factory=lambda: MappingProxyType({}))
    # feed -> the same targets grouped by their symbol sets (what the feed router walks).
    deliveries_by_feed: Mapping[str, tuple[DeliveryGroup, ...]] = field(default_factory=lambda: MappingProxyType({}))


def build_instrument_index(
    routes: Mapping[RouteKey, StrategyRoute],
) -> Mapping[str, Mapping[str, tuple[RouteTarget, ...]]]:
    """Index Active and Stopping routes by the instruments their executors have confirmed."""
    index: dict[str, dict[str, list[RouteTarget]]] = {}
    for key in sorted(routes):
        route = routes[key]
        if isinstance(route.state, Degraded):
            continue
        for feed, symbol in route.executor.current_instrument_ids():
            index.setdefault(feed, {}).setdefault(symbol, []).append((key, route.route_instance_id, route.mailbox))
    return MappingProxyType(
        {
            feed: MappingProxyType({symbol: tuple(targets) for symbol, targets in by_symbol.items()})
            for feed, by_symbol in index.items()
        }
    )


def build_delivery_plan(
    index: Mapping[str, Mapping[str, tuple[RouteTarget, ...]]],
) -> Mapping[str, tuple[DeliveryGroup, ...]]:
    """Group each feed's targets by the set of symbols they are routed on, in route-key order."""
    plan: dict[str, tuple[DeliveryGroup, ...]] = {}
    for feed, by_symbol in index.items():
        symbols_of: dict[RouteTarget, set[str]] = {}
        for symbol, targets in by_symbol.items():
            for target in targets:
                symbols_of.setdefault(target, set()).add(symbol)
        groups: dict[frozenset[str], list[RouteTarget]] = {}
        for target in sorted(symbols_of, key=lambda target: target[0]):
            groups.setdefault(frozenset(symbols_of[target]), []).append(target)
        plan[feed] = tuple((symbols, tuple(targets)) for symbols, targets in groups.items())
    return MappingProxyType(plan)


# One feed's trades of a routing turn: venue symbol -> its ticks in arrival order.
SymbolGroups = dict[str, list[MarketData]]


def group_trades(events: Sequence[Any], groups: SymbolGroups) -> None:
    """Append the trades in `events` to their symbol's group, in order.

    Only trades are routed; other event kinds (mark prices, tickers) are not traded on.
    """
    for event in events:
        if isinstance(event, MarketData):
            group = groups.get(event.symbol)
            if group is None:
                groups[event.symbol] = [event]
            else:
                group.append(event)


class RoutingTurn:
    """The trades the feed router routes as one turn, grouped per feed and symbol as they come.

    A backlog is routed in turns as large as two bounds allow: `max_ticks`, what one
    route's mailbox takes as one item, and `max_instrument_ticks`, what one instrument
    may get, so the mailbox of an execution still warming up keeps room for the next
    turn. `fits` judges a slice as if all of it were for the instrument that already has
    the most (its symbols are only counted once it is added); a turn always takes its
    first slice, so a turn is never empty.
    """

    __slots__ = ("groups", "largest", "max_instrument_ticks", "max_ticks", "ticks")

    def __init__(self, max_ticks: int, max_instrument_ticks: int) -> None:
        self.max_ticks = max_ticks
        self.max_instrument_ticks = max_instrument_ticks
        self.groups: dict[str, SymbolGroups] = {}  # feed -> its trades per symbol
        self.ticks = 0  # events added, trades or not
        self.largest = 0  # the most trades one instrument has in this turn

    def fits(self, events: Sequence[Any]) -> bool:
        size = len(events)
        return not self.ticks or (
            self.ticks + size <= self.max_ticks and self.largest + size <= self.max_instrument_ticks
        )

    def add(self, feed: str, events: Sequence[Any]) -> None:
        groups = self.groups.get(feed)
        if groups is None:
            groups = self.groups[feed] = {}
        group_trades(events, groups)
        self.ticks += len(events)
        if groups:
            self.largest = max(self.largest, max(map(len, groups.values())))
