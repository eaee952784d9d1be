"""The Celery app: broker and options from Django settings, tasks autodiscovered."""
from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")

app = Celery("tradingsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect  # type: ignore[untyped-decorator]  # celery ships no types
def _install_beat_schedule(sender: Celery, **kwargs: Any) -> None:
    # Settings are readable only once configured, never at import time.
    from core.schedule import beat_schedule
    from tradingsite.schedule import PERIODIC_JOBS

    sender.conf.beat_schedule = beat_schedule(PERIODIC_JOBS)
