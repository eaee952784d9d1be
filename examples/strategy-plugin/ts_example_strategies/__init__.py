"""Example strategy kinds, written on tradingsite's simple interfaces.

Importing the package registers both kinds (`donchian`, `tick_ema`).
"""

from ts_example_strategies import donchian, tick_ema  # noqa: F401  (registration)
