"""Keep a cancelled task cancelled when a client library turns the cancellation into its own error.

redis-py (and aiohttp) may answer a cancellation that lands mid-command by closing the
connection and raising a ConnectionError. A loop that catches that error to keep going
would swallow the cancellation, and its next `await` would never be cancelled again:
the runtime's teardown would wait on it forever. Python 3.11's `asyncio.wait_for` can
also drop a cancellation that lands as the awaited call completes (fixed in 3.12). Every
loop here calls this in its error handlers and once per iteration.
"""

from __future__ import annotations

import asyncio


def reraise_if_cancelling() -> None:
    """Raise CancelledError when the current task has been asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
