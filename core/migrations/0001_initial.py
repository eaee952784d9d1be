"""Component health, owned by the platform app (core).

The table was created by the site's first schema, under the app label "tradingsite".
A database that has it keeps it with its rows: this migration only records the model
in core's state and moves its content type (and so every permission on it) to core.
A new database gets the table here.
"""
from typing import Any

from django.db import migrations, models

import core.health

TABLE = "tradingsite_componenthealth"


def create_table_if_missing(apps: Any, schema_editor: Any) -> None:
    if TABLE not in schema_editor.connection.introspection.table_names():
        schema_editor.create_model(apps.get_model("core", "ComponentHealth"))
    ContentType = apps.get_model("contenttypes", "ContentType")
    moved = ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="tradingsite", model="componenthealth"
    )
    if not ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="core", model="componenthealth"
    ).exists():
        moved.update(app_label="core")


def drop_table(apps: Any, schema_editor: Any) -> None:
    schema_editor.delete_model(apps.get_model("core", "ComponentHealth"))


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ComponentHealth',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('component', models.CharField(max_length=200, unique=True)),
                        ('process', models.CharField(help_text='Instance id of the reporting process.', max_length=100)),
                        ('status', models.CharField(choices=[('HEALTHY', 'HEALTHY'), ('DEGRADED', 'DEGRADED'), ('BLOCKED', 'BLOCKED')], max_length=10)),
                        ('reason', models.TextField(blank=True)),
                        ('stale_after_s', models.FloatField(help_text='Seconds after which an unrefreshed report is no longer believed.')),
                        ('stale_status', models.CharField(choices=[('HEALTHY', 'HEALTHY'), ('DEGRADED', 'DEGRADED'), ('BLOCKED', 'BLOCKED')], default=core.health.Status['BLOCKED'], max_length=10)),
                        ('updated_at', models.DateTimeField()),
                    ],
                    options={
                        'verbose_name_plural': 'component health',
                        'db_table': TABLE,
                        'ordering': ['component'],
                    },
                ),
            ],
            database_operations=[],
        ),
        # After the state operation, so the function sees the model.
        migrations.RunPython(create_table_if_missing, drop_table),
    ]
