"""A sweep worker's start: Django set up once, before any module that needs the app registry.

Kept apart from backtesting.sweep on purpose: a worker (and the fork server's preload)
imports this module to run the initializer, and importing the sweep (models included)
first would fail. In a worker forked from the preloaded fork server Django is ready
and the setup returns at once.

A worker runs many points over the same tick file, so it reads the file's tape once
(`worker_tape`) and keeps it for every point it is given.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backtesting.tick_tape import TickTape

_tapes: dict[tuple[str, int, int], TickTape] = {}


def worker_setup() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    django.setup()


def worker_tape(path: str, feed: str) -> TickTape:
    """The tape of the tick file at `path`, read once per process (again if the file changed)."""
    from backtesting.tick_tape import read_tick_tape

    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size)
    tape = _tapes.get(key)
    if tape is None:
        _tapes.clear()  # one file at a time: a tape of a million ticks is tens of MB
        tape = _tapes[key] = read_tick_tape(path, feed=feed)
    return tape
