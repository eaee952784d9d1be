"""Celery and the periodic jobs: a broker with REDIS_URL, in-process and eager without."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env
from tradingsite.settings.channel_layers import REDIS_URL

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    # Embedded default: periodic jobs run inside the site process; a stray .delay()
    # runs inline instead of waiting for a broker that does not exist.
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="celery")
# Cadence overrides of the declared periodic jobs (core.schedule), e.g. "clear-expired-sessions=600".
PERIODIC_JOB_INTERVALS: dict[str, float] = {}
for _item in env.list("PERIODIC_JOB_INTERVALS", default=[]):
    _name, _, _seconds = _item.partition("=")
    try:
        PERIODIC_JOB_INTERVALS[_name.strip()] = float(_seconds)
    except ValueError:
        raise ImproperlyConfigured(f"PERIODIC_JOB_INTERVALS: {_item!r} is not name=seconds") from None
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Beat keeps its schedule in the database (django-celery-beat, editable in the admin), seeded
# from the declared jobs; one beat sends at a time, the holder of the beat lease.
CELERY_BEAT_SCHEDULER = "tradingsite.beat_scheduler:LeasedDatabaseScheduler"
# Save each entry's last run right after sending it, so a beat taking over knows what ran.
CELERY_BEAT_SYNC_EVERY = 1
# A beat that dies frees the lease after this long; the holder renews it at least 3 times per TTL.
BEAT_LEASE_TTL_S = env.float("BEAT_LEASE_TTL_S", default=30.0)
if not BEAT_LEASE_TTL_S > 0:
    raise ImproperlyConfigured(f"BEAT_LEASE_TTL_S must be positive, not {BEAT_LEASE_TTL_S!r}")
# A backtest run or sweep renews its heartbeat this often while it runs (0: never, for an
# in-memory test database, where a second writer thread fails the first at once); the
# "backtests-fail-stalled" job fails a running one whose heartbeat is older than the other.
BACKTEST_HEARTBEAT_S = env.float("BACKTEST_HEARTBEAT_S", default=10.0)
BACKTEST_STALL_AFTER_S = env.float("BACKTEST_STALL_AFTER_S", default=120.0)
if not BACKTEST_HEARTBEAT_S >= 0 or not BACKTEST_STALL_AFTER_S > BACKTEST_HEARTBEAT_S:
    raise ImproperlyConfigured(
        "BACKTEST_STALL_AFTER_S must be above BACKTEST_HEARTBEAT_S (at least 0): "
        f"{BACKTEST_STALL_AFTER_S!r} and {BACKTEST_HEARTBEAT_S!r}"
    )
