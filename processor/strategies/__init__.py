"""Strategy kinds as plug-ins; importing this package registers every built-in kind.

A new built-in kind is a module here whose class is decorated with `@register_strategy`,
imported below.
"""

from processor.strategies import ema, volume_breakout  # noqa: F401  (registration)
from processor.strategies.base import StrategyLogic
from processor.strategies.registry import (
    STRATEGIES,
    clean_params,
    kind_choices,
    output_json_values,
    register_strategy,
    strategy_class,
    unregister_strategy,
)

__all__ = [
    "STRATEGIES",
    "StrategyLogic",
    "clean_params",
    "kind_choices",
    "output_json_values",
    "register_strategy",
    "strategy_class",
    "unregister_strategy",
]
