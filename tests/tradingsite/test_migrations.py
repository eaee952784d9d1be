"""Migrations are complete and apply on the configured database (PostgreSQL in CI)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db
def test_models_and_migrations_agree() -> None:
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.needs_postgres
@pytest.mark.django_db
def test_every_migration_is_applied_on_postgresql() -> None:
    assert connection.vendor == "postgresql"
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('feeds_feed'), to_regclass('orders_account')")
        assert all(cursor.fetchone())
