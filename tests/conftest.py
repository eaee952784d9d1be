"""Shared test setup.

Tests that need a real PostgreSQL or Redis are marked `needs_postgres` / `needs_redis`.
On a laptop (no DATABASE_URL / REDIS_URL) they skip; with REQUIRE_SERVICES=1 (CI) a
missing service fails them instead, so CI can never pass by skipping.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import Awaitable, Callable, TypeVar

import pytest
from django.conf import settings

T = TypeVar("T")
REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def _service_missing(item: pytest.Item) -> str | None:
    if item.get_closest_marker("needs_postgres") and settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return "needs PostgreSQL: set DATABASE_URL=postgres://..."
    if item.get_closest_marker("needs_redis") and not settings.REDIS_URL:
        return "needs Redis: set REDIS_URL=redis://..."
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _service_missing(item)
    if reason is None:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


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
