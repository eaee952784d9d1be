"""Read paths of the processor app."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from processor.models import Strategy
from processor.specs import StrategySpec
from processor.strategies import STRATEGIES, clean_params


@dataclass(frozen=True)
class DesiredStrategies:
    specs: tuple[StrategySpec, ...]
    rejected: dict[str, str] = field(default_factory=dict)  # strategy name -> why it cannot run


def desired_strategies(feed_names: Collection[str] | None = None) -> DesiredStrategies:
    """Return the enabled strategies with valid params, on instruments of `feed_names` (all when None).

    Two queries whatever the number of strategies.
    """
    specs: list[StrategySpec] = []
    rejected: dict[str, str] = {}
    for strategy in Strategy.objects.filter(enabled=True).prefetch_related("instruments__feed").order_by("id"):
        if strategy.kind not in STRATEGIES:
            rejected[strategy.name] = f"no plug-in for kind {strategy.kind!r}"
            continue
        try:
            params = clean_params(strategy.kind, strategy.params)
        except ValidationError as exc:
            rejected[strategy.name] = "; ".join(exc.messages)
            continue
        instruments = frozenset(
            (instrument.feed.name, instrument.venue_symbol)
            for instrument in strategy.instruments.all()
            if feed_names is None or instrument.feed.name in feed_names
        )
        specs.append(
            StrategySpec.build(
                strategy_id=strategy.pk,
                name=strategy.name,
                kind=strategy.kind,
                params=params,
                instruments=instruments,
            )
        )
    return DesiredStrategies(tuple(specs), rejected)
