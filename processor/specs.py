"""What the repository wants run: one StrategySpec per enabled strategy, and the keys routes use.

Specs are frozen and compare by value; the route key changes with the kind or the
params, so a changed configuration is a new route.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from feeds.market import MarketData

FeedSymbol = tuple[str, str]  # (feed name, venue symbol)
RouteKey = tuple[int, str, str]  # (strategy id, kind, canonical params JSON): a config change is a new route
StrategyChunk = tuple[FeedSymbol, Sequence[MarketData]]  # what a strategy mailbox holds


@dataclass(frozen=True)
class StrategySpec:
    """One enabled strategy as the repository wants it run."""

    strategy_id: int
    name: str
    kind: str
    params_json: str  # canonical (sorted keys) so equal params compare equal
    instruments: frozenset[FeedSymbol]

    @staticmethod
    def build(
        *, strategy_id: int, name: str, kind: str, params: Mapping[str, Any], instruments: frozenset[FeedSymbol]
    ) -> StrategySpec:
        return StrategySpec(strategy_id, name, kind, json.dumps(dict(params), sort_keys=True), instruments)

    @property
    def params(self) -> dict[str, Any]:
        return dict(json.loads(self.params_json))

    @property
    def route_key(self) -> RouteKey:
        return (self.strategy_id, self.kind, self.params_json)
