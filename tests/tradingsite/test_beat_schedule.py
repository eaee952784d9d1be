"""Beat's database schedule: seeded from the declared jobs, the operator's edits kept, one sender, expiring sends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from celery.schedules import crontab, schedule
from django.utils import timezone
from django.utils.module_loading import import_string
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.leases import lease_holder, take_lease
from core.models import ComponentHealth
from core.process_heartbeat import ProcessHeartbeat
from core.schedule import job_named, periodic_jobs, scheduled_interval_s
from tradingsite.beat_scheduler import BEAT_LEASE, LeasedDatabaseScheduler, send_expiry_s
from tradingsite.beat_seed import seed_schedule
from tradingsite.celery import app as celery_app

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_fresh_database_gets_one_row_per_declared_job_at_its_cadence(settings) -> None:
    settings.PERIODIC_JOB_INTERVALS = {"orders-reconcile": 2.5}
    report = seed_schedule()
    declared = {job.name: job for job in periodic_jobs()}
    assert sorted(report.created) == sorted(declared)
    rows = {row.name: row for row in PeriodicTask.objects.select_related("interval")}
    for name, job in declared.items():
        assert rows[name].task == job.task and rows[name].enabled
        assert rows[name].interval.period == IntervalSchedule.SECONDS
    assert rows["orders-reconcile"].interval.every == 3  # whole seconds, rounded up
    assert rows["clear-expired-sessions"].interval.every == 3600
    assert seed_schedule().created == []  # a second beat (or a restart) creates nothing


def test_the_operators_interval_and_enabled_edits_survive_a_reseed(settings) -> None:
    seed_schedule()
    row = PeriodicTask.objects.get(name="orders-reconcile")
    row.interval = IntervalSchedule.objects.create(every=45, period=IntervalSchedule.SECONDS)
    row.enabled = False
    row.expire_seconds = 20
    row.save()
    settings.PERIODIC_JOB_INTERVALS = {"orders-reconcile": 5.0}  # changed later: the row stands
    report = seed_schedule()
    assert "orders-reconcile" in report.kept
    row.refresh_from_db()
    assert (row.interval.every, row.enabled, row.expire_seconds) == (45, False, 20)


def test_a_row_pointing_at_an_old_task_path_is_retargeted_and_nothing_else_changes() -> None:
    seed_schedule()
    PeriodicTask.objects.filter(name="orders-reconcile").update(task="orders.tasks.renamed_long_ago", enabled=False)
    assert seed_schedule().retargeted == ["orders-reconcile"]
    row = PeriodicTask.objects.get(name="orders-reconcile")
    assert row.task == "orders.tasks.reconcile_accounts" and not row.enabled


def test_a_send_expires_when_the_next_one_is_due() -> None:
    assert send_expiry_s(schedule(timedelta(seconds=10)), timezone.now()) == 10.0
    now = timezone.now()
    next_hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    assert send_expiry_s(crontab(minute="0"), now) == pytest.approx((next_hour - now).total_seconds(), abs=2)


@pytest.fixture
def schedulers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[LeasedDatabaseScheduler]]:
    # Beat's health heartbeat writes from a thread of its own. The in-memory SQLite test
    # database shares one cache between threads, where such a write makes this thread's
    # lease write fail at once ("table is locked") instead of waiting as on a database
    # file; the heartbeat's rows are checked with real beat processes (test_beat_processes).
    monkeypatch.setattr(ProcessHeartbeat, "start", lambda self: self)
    made: list[LeasedDatabaseScheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


def _scheduler(made: list[LeasedDatabaseScheduler]) -> LeasedDatabaseScheduler:
    scheduler = LeasedDatabaseScheduler(app=celery_app)
    made.append(scheduler)
    return scheduler


def test_one_scheduler_holds_the_lease_the_other_stands_by_and_takes_over_on_release(
    schedulers: list[LeasedDatabaseScheduler], settings
) -> None:
    settings.BEAT_LEASE_TTL_S = 30.0
    first = _scheduler(schedulers)
    PeriodicTask.objects.update(enabled=False)  # ticks here must not send: this checks who may
    second = _scheduler(schedulers)
    assert first.max_interval <= 10.0  # renews at least three times per TTL
    first.tick()
    second.tick()
    assert first.holding and not second.holding
    holder = lease_holder(BEAT_LEASE)
    assert holder is not None and holder.owner == first.lease_owner and "celery beat" in holder.holder
    first.close()  # a clean stop hands over at once instead of after the TTL
    second.tick()
    assert second.holding
    current = lease_holder(BEAT_LEASE)
    assert current is not None and current.owner == second.lease_owner


def test_a_holder_whose_lease_was_taken_after_expiry_stops_sending(
    schedulers: list[LeasedDatabaseScheduler], settings
) -> None:
    settings.BEAT_LEASE_TTL_S = 30.0
    stalled = _scheduler(schedulers)
    PeriodicTask.objects.update(enabled=False)
    stalled.tick()
    assert stalled.holding
    # The holder stalled past its TTL and another beat took the lease meanwhile.
    later = lambda: timezone.now() + timedelta(seconds=31)  # noqa: E731
    assert take_lease(BEAT_LEASE, owner="other-beat", ttl_s=30.0, holder="celery beat elsewhere", now=later)
    assert stalled.tick() == stalled.max_interval
    assert not stalled.holding


def test_a_jobs_health_goes_stale_after_the_interval_beat_actually_uses(settings) -> None:
    seed_schedule()
    row = PeriodicTask.objects.get(name="clear-expired-sessions")
    row.interval = IntervalSchedule.objects.create(every=45, period=IntervalSchedule.SECONDS)
    row.save()
    job = job_named("clear-expired-sessions")
    settings.REDIS_URL = ""  # embedded: no beat, the declared cadence runs
    assert scheduled_interval_s(job) == 3600.0
    settings.REDIS_URL = "redis://127.0.0.1:6379/9"  # scale-out: beat sends on the edited row
    assert scheduled_interval_s(job) == 45.0
    import_string(job.task)()
    assert ComponentHealth.objects.get(component="job:clear-expired-sessions").stale_after_s == 90.0
