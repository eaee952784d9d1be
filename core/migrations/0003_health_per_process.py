"""Component health per process: one row per (process, component), with the process's identity.

Plain schema operations are right here whichever schema made the table (the site's
first schema or 0001): dropping the old uniqueness on `component` finds the constraint
by introspection, not by name. Existing rows keep their bare instance id as `process`
with an empty role: they read as a process that is gone, and the prune job removes them
once a live process has reported the same components.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0002_lease'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='componenthealth',
            options={'ordering': ['component', '-updated_at'], 'verbose_name_plural': 'component health'},
        ),
        migrations.AddField(
            model_name='componenthealth',
            name='host',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='componenthealth',
            name='label',
            field=models.CharField(blank=True, help_text='What the process runs (feed:sim, site).', max_length=200),
        ),
        migrations.AddField(
            model_name='componenthealth',
            name='pid',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='componenthealth',
            name='role',
            field=models.CharField(blank=True, help_text='Kind of process: site, web, runfeed, worker, beat.', max_length=20),
        ),
        migrations.AddField(
            model_name='componenthealth',
            name='started_at',
            field=models.DateTimeField(blank=True, help_text='When the reporting process started.', null=True),
        ),
        migrations.AlterField(
            model_name='componenthealth',
            name='component',
            field=models.CharField(max_length=200),
        ),
        migrations.AlterField(
            model_name='componenthealth',
            name='process',
            field=models.CharField(help_text='Reporting process: host:pid:start-instance.', max_length=200),
        ),
        migrations.AddIndex(
            model_name='componenthealth',
            index=models.Index(fields=['component', 'updated_at'], name='componenthealth_latest'),
        ),
        migrations.AddConstraint(
            model_name='componenthealth',
            constraint=models.UniqueConstraint(fields=('process', 'component'), name='componenthealth_one_row_per_process'),
        ),
    ]
