"""The database beat schedule, seeded from the declared periodic jobs without undoing an operator's edits.

The rule: a declared job (core.schedule) with no row of its name gets one, every
job_interval_s seconds (PERIODIC_JOB_INTERVALS applied), enabled. Once a row exists it
belongs to the operator: its interval, enabled flag, expiry and queue are kept as the
admin left them, across restarts and hosts. Only the task path follows the code, since a
renamed function would otherwise leave a row that sends a task no worker knows. Rows of
jobs no longer declared are left alone: an operator's own entries look the same.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.schedule import job_interval_s, periodic_jobs

log = logging.getLogger(__name__)


@dataclass
class SeedReport:
    created: list[str] = field(default_factory=list)
    retargeted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def interval_row(every_s: float) -> IntervalSchedule:
    """The interval row for `every_s` (whole seconds, at least 1: the column is an integer)."""
    every = max(1, math.ceil(every_s))
    # No unique constraint on (every, period): two beats seeding at once may both create
    # one, so take the oldest instead of get_or_create (which would then see two).
    found = IntervalSchedule.objects.filter(every=every, period=IntervalSchedule.SECONDS).order_by("pk").first()
    return found or IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)


def seed_schedule() -> SeedReport:
    """Create the rows of declared jobs that have none; point existing rows at the job's task."""
    report = SeedReport()
    for job in periodic_jobs():
        row = PeriodicTask.objects.filter(name=job.name).first()
        if row is None:
            try:
                with transaction.atomic():
                    PeriodicTask.objects.create(
                        name=job.name,
                        task=job.task,
                        interval=interval_row(job_interval_s(job)),
                        enabled=True,
                        description="declared in code; interval and enabled are kept as edited here",
                    )
            except IntegrityError:  # another beat seeded it first: its row stands
                report.kept.append(job.name)
            else:
                report.created.append(job.name)
            continue
        if row.task != job.task:
            # update(), not save(): the operator's other fields are not rewritten from a stale read.
            PeriodicTask.objects.filter(pk=row.pk).update(task=job.task)
            report.retargeted.append(job.name)
        else:
            report.kept.append(job.name)
    if report.created or report.retargeted:
        log.info("beat schedule: created %s, retargeted %s", report.created or "none", report.retargeted or "none")
    return report
