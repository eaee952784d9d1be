"""SIGINT/SIGTERM handling shared by the runtime entry points."""
from __future__ import annotations

import asyncio
import signal
from typing import Callable


def stop_on_signals(loop: asyncio.AbstractEventLoop, request_stop: Callable[[], None]) -> None:
    """Resolve a clean stop on SIGINT and SIGTERM (a second signal changes nothing)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)


def parse_feed_names(values: list[str] | None) -> list[str]:
    """Flatten repeated and comma-separated --feed values, keeping order, without duplicates."""
    names: list[str] = []
    for value in values or []:
        for name in value.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return names
