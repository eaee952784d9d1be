"""Waiting helpers: poll for a condition instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], *, timeout_s: float = 10.0, interval_s: float = 0.05) -> T:
    """Return check()'s first truthy result, retrying until timeout_s; fail with the last error."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except AssertionError as exc:
            last = exc
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s}s") from last


async def async_eventually(
    check: Callable[[], Awaitable[T]], *, timeout_s: float = 10.0, interval_s: float = 0.05
) -> T:
    """Async twin of `eventually`."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = await check()
            if result:
                return result
        except AssertionError as exc:
            last = exc
        await asyncio.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s}s") from last


def wait_site_ready(base: str, process: subprocess.Popen[Any], *, timeout_s: float = 60.0) -> None:
    """Wait until the site subprocess at `base` answers /readyz with 200; fail if it exits."""

    def ready() -> bool:
        assert process.poll() is None, "the site exited early"
        try:
            return urllib.request.urlopen(f"{base}/readyz", timeout=2).status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    eventually(ready, timeout_s=timeout_s, interval_s=0.2)
