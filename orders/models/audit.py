"""An append-only audit trail of what the trading side did and why."""

from __future__ import annotations

from django.db import models


class AuditEvent(models.Model):
    """ENTRY/EXIT submissions, fills, cancels, reconciliation corrections, failures."""

    account = models.ForeignKey(
        "orders.Account", null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events"
    )
    strategy = models.ForeignKey(
        "processor.Strategy", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    event = models.CharField(max_length=40, db_index=True)  # e.g. "entry.placed", "reconcile.orphan"
    client_order_id = models.CharField(max_length=40, blank=True, db_index=True)
    message = models.CharField(max_length=500, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} {self.client_order_id}"
