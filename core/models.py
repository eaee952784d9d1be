"""Models of the platform: reported component health and named leases."""

from __future__ import annotations

from django.db import models

from core.health import Status
from core.lease_model import Lease

__all__ = ["ComponentHealth", "Lease"]


class ComponentHealth(models.Model):
    """Last reported health of one runtime component (a feed, a stream, a periodic job) in one process.

    Keyed by (process, component): two processes that run a component of the same name
    (`processor`, `recorder`) each keep their own row. Written only by the process that
    owns the component; read by the web.
    """

    component = models.CharField(max_length=200)
    process = models.CharField(max_length=200, help_text="Reporting process: host:pid:start-instance.")
    role = models.CharField(max_length=20, blank=True, help_text="Kind of process: site, web, runfeed, worker, beat.")
    label = models.CharField(max_length=200, blank=True, help_text="What the process runs (feed:sim, site).")
    host = models.CharField(max_length=200, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the reporting process started.")
    status = models.CharField(max_length=10, choices=[(s.value, s.value) for s in Status])
    reason = models.TextField(blank=True)
    stale_after_s = models.FloatField(help_text="Seconds after which an unrefreshed report is no longer believed.")
    stale_status = models.CharField(max_length=10, choices=[(s.value, s.value) for s in Status], default=Status.BLOCKED)
    updated_at = models.DateTimeField()

    class Meta:
        # The table of the site's first schema, from before the platform had an app of its own.
        db_table = "tradingsite_componenthealth"
        ordering = ["component", "-updated_at"]
        verbose_name_plural = "component health"
        constraints = [
            models.UniqueConstraint(fields=["process", "component"], name="componenthealth_one_row_per_process"),
        ]
        indexes = [models.Index(fields=["component", "updated_at"], name="componenthealth_latest")]

    def __str__(self) -> str:
        return f"{self.component}@{self.process}: {self.status}"
