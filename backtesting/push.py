"""Progress of a user's backtest runs, pushed to that user's browsers (ws/backtests/)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)

PROGRESS_TYPE = "backtest.progress"
SWEEP_TYPE = "backtest.sweep"


def backtest_group(user_id: int) -> str:
    """The group of one user's backtest pages; no other user's socket joins it."""
    return f"backtests.user.{user_id}"


def run_state(run: Any) -> dict[str, Any]:
    """What the browser shows of a run's progress (the websocket message and the status JSON)."""
    return {
        "id": run.pk,
        "status": run.status,
        "ticks_done": run.ticks_done,
        "ticks_total": run.ticks_total,
        "progress": round(run.progress, 4),
        "error": run.error,
    }


def sweep_state(sweep: Any) -> dict[str, Any]:
    """What the browser shows of a sweep's progress (the websocket message and the status JSON)."""
    return {
        "id": sweep.pk,
        "status": sweep.status,
        "points_done": sweep.points_done,
        "points_total": sweep.points_total,
        "progress": round(sweep.progress, 4),
        "error": sweep.error,
    }


def web_event_loop() -> asyncio.AbstractEventLoop | None:
    """The web server's event loop when called from a request's sync thread (None elsewhere).

    The in-memory channel layer (embedded default) is not thread-safe: a run in a
    background thread of the web process hands its pushes to this loop instead.
    """
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def progress_push(run: Any, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Send the run's state to its owner's group; called after the state is saved (not inside a transaction).

    With `loop` (a running loop of another thread), the send runs on that loop.
    """
    _push(run.owner_id, {"type": PROGRESS_TYPE, "run": run_state(run)}, loop, f"run {run.pk}")


def sweep_push(sweep: Any, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Send the sweep's state to its owner's group, as progress_push does for a run."""
    _push(sweep.owner_id, {"type": SWEEP_TYPE, "sweep": sweep_state(sweep)}, loop, f"sweep {sweep.pk}")


def _push(owner_id: int, message: dict[str, Any], loop: asyncio.AbstractEventLoop | None, what: str) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(layer.group_send(backtest_group(owner_id), message), loop).result(5)
        else:
            async_to_sync(layer.group_send)(backtest_group(owner_id), message)
    except Exception:  # the saved state stands; the page also reads it when it (re)connects
        log.warning("backtesting: could not push the progress of %s", what, exc_info=True)
