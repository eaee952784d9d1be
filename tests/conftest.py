"""Shared test setup.

Tests that need a real PostgreSQL or Redis are marked `needs_postgres` / `needs_redis`,
the browser tests `needs_chromium`. On a laptop (no DATABASE_URL / REDIS_URL, no
chromium) they skip; with REQUIRE_SERVICES=1 (CI) a missing service fails them instead,
so CI can never pass by skipping.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def chromium_path() -> str:
    """The browser the tests drive: Debian's chromium unless CHROMIUM_PATH names another."""
    return os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


def pytest_configure(config: pytest.Config) -> None:
    # Worker threads (database_sync_to_async) must not keep connections past a call, or
    # PostgreSQL refuses to drop the test database at the end of the run.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


def _service_missing(item: pytest.Item) -> str | None:
    if (
        item.get_closest_marker("needs_postgres")
        and settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql"
    ):
        return "needs PostgreSQL: set DATABASE_URL=postgres://..."
    if item.get_closest_marker("needs_redis") and not settings.REDIS_URL:
        return "needs Redis: set REDIS_URL=redis://..."
    if item.get_closest_marker("needs_chromium") and not os.access(chromium_path(), os.X_OK):
        return f"needs Chromium at {chromium_path()}: apt-get install chromium"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _service_missing(item)
    if reason is None:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)
