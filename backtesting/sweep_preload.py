"""Imported by the sweeps' fork server before it forks any worker: Django and the backtest code, loaded once.

The fork server is a fresh interpreter of its own (never a fork of the process that
asked for the sweep), so what it inherits is only this: settings read, apps (strategy
plug-ins included) ready, the strategy kinds, the simulated account and the tape
reader imported. It opens no database connection and runs no event loop, so a worker
forked from it shares neither with anyone; each worker still runs `worker_setup`,
which finds Django ready and costs nothing.

A failure here is logged and left to the worker's own setup to raise, where the
sweep reports it: the fork server itself must come up whatever the settings say.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def _preload() -> None:
    from backtesting.sweep_worker import worker_setup

    worker_setup()
    import numpy  # noqa: F401  (the whole-column folds)
    import pyarrow.compute
    import pyarrow.csv  # noqa: F401
    from django.db import connections

    import backtesting.runner
    import backtesting.tick_tape  # noqa: F401
    import processor.strategies
    import processor.strategies.ema_arrays  # noqa: F401

    connections.close_all()  # none should be open; a worker must never inherit one


try:
    _preload()
except Exception:  # the worker's own setup raises it again, where the sweep reports it
    log.exception("sweep fork server: preloading Django and the backtest code failed")
