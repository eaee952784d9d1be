"""Celery and the periodic jobs: a broker with REDIS_URL, in-process and eager without."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import VAR_DIR, env
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
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
