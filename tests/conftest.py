"""Shared test setup.

Tests that need a real PostgreSQL or Redis are marked `needs_postgres` / `needs_redis`,
the browser tests `needs_chromium`. On a laptop (no DATABASE_URL / REDIS_URL, no
chromium) they skip; with REQUIRE_SERVICES=1 (CI) a missing service fails them instead,
so CI can never pass by skipping. REQUIRE_CHROMIUM=1 does the same for the browser alone
(CI's SQLite pass, which runs the browser tests and has no PostgreSQL to require).
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"
REQUIRE_CHROMIUM = REQUIRE_SERVICES or os.environ.get("REQUIRE_CHROMIUM") == "1"


def chromium_path() -> str:
    """The browser the tests drive: Debian's chromium unless CHROMIUM_PATH names another."""
    return os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


def pytest_configure(config: pytest.Config) -> None:
    # Worker threads (database_sync_to_async) must not keep connections past a call, or
    # PostgreSQL refuses to drop the test database at the end of the run.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The site keeps Django's PBKDF2 (a million rounds, most of a second a password on this
    # machine); hundreds of users made and logins tried in-process would spend minutes on it.
    # No test here checks the hash itself, and the site's own processes that tests start keep
    # the real hasher. The site's hashers stay listed after the fast one, so a password a site
    # process set still checks here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]


def _services_missing(item: pytest.Item) -> list[tuple[str, str | None]]:
    """What the test needs and lacks, each with the variable that makes the lack a failure."""
    services = "REQUIRE_SERVICES" if REQUIRE_SERVICES else None
    missing: list[tuple[str, str | None]] = []
    if (
        item.get_closest_marker("needs_postgres")
        and settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql"
    ):
        missing.append(("needs PostgreSQL: set DATABASE_URL=postgres://...", services))
    if item.get_closest_marker("needs_redis") and not settings.REDIS_URL:
        missing.append(("needs Redis: set REDIS_URL=redis://...", services))
    if item.get_closest_marker("needs_chromium") and not os.access(chromium_path(), os.X_OK):
        browser = services or ("REQUIRE_CHROMIUM" if REQUIRE_CHROMIUM else None)
        missing.append((f"needs Chromium at {chromium_path()}: apt-get install chromium", browser))
    return missing


def pytest_runtest_setup(item: pytest.Item) -> None:
    missing = _services_missing(item)
    for reason, required_by in missing:
        if required_by is not None:
            pytest.fail(f"{required_by}=1 but {reason}", pytrace=False)
    if missing:
        pytest.skip(missing[0][0])
