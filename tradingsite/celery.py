"""The Celery app: broker and options from Django settings, tasks autodiscovered.

Beat's schedule is not configured here: beat_scheduler (settings.jobs) reads it from the
database, seeded from the declared periodic jobs (tradingsite.beat_scheduler).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")

app = Celery("tradingsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect  # type: ignore[untyped-decorator]  # celery ships no types
def _load_django_apps(sender: Celery, **kwargs: Any) -> None:
    # Beat's scheduler reads and seeds the schedule through the ORM (the declared jobs live
    # in the apps' tasks modules) before Celery's Django fixup would have set Django up.
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
