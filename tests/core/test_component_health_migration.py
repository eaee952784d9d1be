"""Component health moved from the site's app to core: a database that has the table keeps its rows."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from core.models import ComponentHealth

INITIAL = ("core", "0001_initial")
# Found by name, whatever number it carries after other core migrations.
PER_PROCESS = next(key for key in MigrationLoader(None).disk_migrations if key[1].endswith("_health_per_process"))


def _migrate(target: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(target)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _back_to_the_latest_schema():  # type: ignore[no-untyped-def]
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_an_existing_table_keeps_its_rows_and_permissions_move_to_core() -> None:
    _migrate([("core", None)])
    assert ComponentHealth._meta.db_table not in connection.introspection.table_names()
    # The table and content type as the site's first schema (app label "tradingsite") left them.
    old_model = MigrationExecutor(connection).loader.project_state(INITIAL).apps.get_model("core", "ComponentHealth")
    with connection.schema_editor() as editor:
        editor.create_model(old_model)
    old_type = ContentType.objects.get_for_model(ComponentHealth)
    ContentType.objects.filter(pk=old_type.pk).update(app_label="tradingsite")
    ContentType.objects.clear_cache()
    permissions = set(Permission.objects.filter(content_type=old_type).values_list("codename", flat=True))
    old_model.objects.create(
        component="feed:kept", process="p1", status="HEALTHY", stale_after_s=5, updated_at=timezone.now()
    )

    _migrate([INITIAL])

    assert list(old_model.objects.values_list("component", flat=True)) == ["feed:kept"]
    moved = ContentType.objects.get(pk=old_type.pk)
    assert (moved.app_label, moved.model) == ("core", "componenthealth")
    assert "view_componenthealth" in permissions
    assert set(Permission.objects.filter(content_type=moved).values_list("codename", flat=True)) == permissions


@pytest.mark.django_db(transaction=True)
def test_a_new_database_gets_the_table() -> None:
    _migrate([("core", None)])
    _migrate([INITIAL])
    assert ComponentHealth._meta.db_table in connection.introspection.table_names()
    assert not ComponentHealth.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_rows_of_the_old_schema_survive_and_two_processes_may_then_share_a_component_name() -> None:
    _migrate([INITIAL])
    old = MigrationExecutor(connection).loader.project_state(INITIAL).apps.get_model("core", "ComponentHealth")
    old.objects.create(
        component="processor", process="abc123", status="HEALTHY", stale_after_s=5, updated_at=timezone.now()
    )

    _migrate([PER_PROCESS])

    new = MigrationExecutor(connection).loader.project_state(PER_PROCESS).apps.get_model("core", "ComponentHealth")
    (kept,) = new.objects.all()
    assert (kept.component, kept.process, kept.role) == ("processor", "abc123", "")
    new.objects.create(
        component="processor",
        process="h:1:x",
        role="runfeed",
        status="HEALTHY",
        stale_after_s=5,
        updated_at=timezone.now(),
    )
    assert new.objects.filter(component="processor").count() == 2
