"""The Celery app: broker and options from Django settings, tasks autodiscovered."""
from __future__ import annotations

import os

from celery import Celery

from tradingsite.schedule import beat_schedule

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")

app = Celery("tradingsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.beat_schedule = beat_schedule()
app.autodiscover_tasks()
