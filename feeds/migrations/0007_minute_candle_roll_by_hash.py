from django.db import migrations

from feeds.recording.minute_candles import replace_functions


# The insert trigger's rollup finds each minute's open and close by a hash join on its
# first and last exchange time instead of sorting the whole statement's rows twice: the
# same candles, at a fraction of the recorder's cost per tick.
def use_current_functions(apps, schema_editor):
    replace_functions(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("feeds", "0006_minute_candle_rollup"),
    ]

    operations = [
        migrations.RunPython(use_current_functions, migrations.RunPython.noop),
    ]
