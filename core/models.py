"""Models of the platform: reported component health and named leases."""

from __future__ import annotations

from django.db import models

from core.health import Status
from core.lease_model import Lease

__all__ = ["ComponentHealth", "Lease"]


class ComponentHealth(models.Model):
    """Last reported health of one runtime component (a feed, a stream, a periodic job).

    Written only by the process that owns the component; read by the web.
    """

    component = models.CharField(max_length=200, unique=True)
    process = models.CharField(max_length=100, help_text="Instance id of the reporting process.")
    status = models.CharField(max_length=10, choices=[(s.value, s.value) for s in Status])
    reason = models.TextField(blank=True)
    stale_after_s = models.FloatField(help_text="Seconds after which an unrefreshed report is no longer believed.")
    stale_status = models.CharField(max_length=10, choices=[(s.value, s.value) for s in Status], default=Status.BLOCKED)
    updated_at = models.DateTimeField()

    class Meta:
        # The table of the site's first schema, from before the platform had an app of its own.
        db_table = "tradingsite_componenthealth"
        ordering = ["component"]
        verbose_name_plural = "component health"

    def __str__(self) -> str:
        return f"{self.component}: {self.status}"
