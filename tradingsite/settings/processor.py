"""The strategy runtime: route reconciliation, backfill, how often signals and outputs are stored."""

from __future__ import annotations

from tradingsite.settings.base import env

# How often the route command loop's reconcile side re-reads the strategy table.
PROCESSOR_RECONCILE_INTERVAL_S = env.float("PROCESSOR_RECONCILE_INTERVAL_S", default=1.0)
# Recorded history a strategy replays before going live (kinds may ask for more, e.g. EMA).
PROCESSOR_BACKFILL_S = env.float("PROCESSOR_BACKFILL_S", default=3600.0)
# Signals are stored within this interval; outputs only the latest per strategy and
# instrument, every PROCESSOR_OUTPUT_PERSIST_INTERVAL_S.
PROCESSOR_SIGNAL_FLUSH_INTERVAL_S = env.float("PROCESSOR_SIGNAL_FLUSH_INTERVAL_S", default=0.5)
PROCESSOR_OUTPUT_PERSIST_INTERVAL_S = env.float("PROCESSOR_OUTPUT_PERSIST_INTERVAL_S", default=5.0)
# Strategy kinds of your own: modules imported at start-up that register kinds with
# @register_strategy (comma-separated, e.g. "mypackage.strategies"). Installed packages
# can instead declare an entry point in the "tradingsite.strategies" group.
STRATEGY_MODULES = env.list("STRATEGY_MODULES", default=[])
