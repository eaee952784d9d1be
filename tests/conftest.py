"""Shared test setup.

Tests that need a real PostgreSQL or Redis are marked `needs_postgres` / `needs_redis`,
the browser tests `needs_chromium`. On a laptop (no DATABASE_URL / REDIS_URL, no
chromium) they skip; with REQUIRE_SERVICES=1 (CI) a missing service fails them instead,
so CI can never pass by skipping. REQUIRE_CHROMIUM=1 does the same for the browser alone
(CI's SQLite pass, which runs the browser tests and has no PostgreSQL to require).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import pytest
from django.conf import settings

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"
REQUIRE_CHROMIUM = REQUIRE_SERVICES or os.environ.get("REQUIRE_CHROMIUM") == "1"


def chromium_path() -> str:
    """The browser the tests drive: Debian's chromium unless CHROMIUM_PATH names another."""
    return os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


# What the post_migrate handlers write after every flush, identical each time.
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def _cheaper_flush(vendor: str) -> None:
    """Flush between transactional tests without the work that gives the same rows back.

    A transactional test (and each module's world) ends with a flush, and each flush
    re-created every content type and permission (post_migrate, whose only receivers are
    those two): most of the time of the flush, a second on a busy machine. Those rows are
    kept instead, and post_migrate, which would only find them there, is not sent. On
    PostgreSQL the tables are emptied with DELETE: Django's one TRUNCATE of every table
    gives all of them and their indexes new files however few rows the test wrote. Django's
    foreign keys there are deferred to the commit, when every table is empty, so the order
    does not matter. A flush that resets sequences or cascades keeps Django's own way.
    """
    from django.core.management.commands import flush
    from django.db.models.signals import post_migrate

    if vendor == "postgresql":
        from django.db.backends.postgresql.operations import DatabaseOperations
    elif vendor == "sqlite":
        from django.db.backends.sqlite3.operations import DatabaseOperations  # type: ignore[assignment]
    else:
        return
    django_flush = DatabaseOperations.sql_flush
    django_emit = flush.emit_post_migrate_signal  # type: ignore[attr-defined]
    kept: list[bool] = [False]

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        receivers = {
            getattr(receiver() if isinstance(receiver, weakref.ReferenceType) else receiver, "__qualname__", None)
            for _, receiver, _ in post_migrate.receivers
        }
        kept[0] = not (reset_sequences or allow_cascade) and receivers <= {"create_permissions", "create_contenttypes"}
        if not kept[0]:
            return django_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        tables = [table for table in tables if table not in KEPT_BY_FLUSH]
        if vendor == "postgresql":
            return [f"DELETE FROM {self.quote_name(table)}" for table in tables]
        return django_flush(self, style, tables)

    def emit_post_migrate_signal(verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
        if not kept[0]:
            django_emit(verbosity, interactive, db, **kwargs)

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign,assignment]
    flush.emit_post_migrate_signal = emit_post_migrate_signal  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    # Worker threads (database_sync_to_async) must not keep connections past a call, or
    # PostgreSQL refuses to drop the test database at the end of the run.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    _cheaper_flush(settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1].removesuffix("3"))
    # The site keeps Django's PBKDF2 (a million rounds, most of a second a password on this
    # machine); hundreds of users made and logins tried in-process would spend minutes on it.
    # No test here checks the hash itself, and the site's own processes that tests start keep
    # the real hasher. The site's hashers stay listed after the fast one, so a password a site
    # process set still checks here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        # The in-process test database is SQLite in memory with a shared cache, where a second
        # writer thread fails the first at once instead of waiting: a backtest's heartbeat
        # thread would fail the run's own writes. The heartbeat is tested on PostgreSQL and in
        # the site processes tests start (file SQLite, which waits).
        settings.BACKTEST_HEARTBEAT_S = 0.0


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
