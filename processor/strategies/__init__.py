"""Strategy kinds as plug-ins; importing this package registers every built-in kind."""
from processor.strategies import ema, volume_breakout  # noqa: F401  (registration)
from processor.strategies.base import STRATEGIES, StrategyLogic, register_strategy, strategy_class

__all__ = ["STRATEGIES", "StrategyLogic", "register_strategy", "strategy_class"]
