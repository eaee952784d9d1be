"""A sweep worker's start: Django set up once, before any module that needs the app registry.

Kept apart from backtesting.sweep on purpose: a spawned worker imports this module to
run the initializer, and importing the sweep (models included) first would fail.
"""

from __future__ import annotations

import os


def worker_setup() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    django.setup()
