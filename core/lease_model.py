"""The row behind a named lease (see core.leases)."""

from __future__ import annotations

from django.db import models


class Lease(models.Model):
    """A site-wide lease on `name`, held by `owner` until `expires_at`.

    One row per name (a feed, the beat scheduler), taken and renewed with one
    conditional upsert so two processes never both believe they hold it.
    `holder` says who holds it in words an operator can act on (host, pid, role).
    """

    name = models.CharField(max_length=200, unique=True)
    owner = models.CharField(max_length=64, blank=True)
    holder = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField()

    class Meta:
        app_label = "core"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"
