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
    # The jobs declare themselves in the apps' tasks modules, which need the apps loaded:
    # beat reads its schedule before Celery's Django fixup has set Django up.
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from core.schedule import beat_schedule

    sender.conf.beat_schedule = beat_schedule()
