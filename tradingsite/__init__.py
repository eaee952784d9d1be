"""tradingsite: settings, wiring, the runtime and the web entry points."""

from tradingsite.celery import app as celery_app

__all__ = ["celery_app"]
