"""The paper exchange's own state, apart from the site's order tables.

The paper broker is a simulated exchange: it keeps its book here so that it survives a
restart of the runtime (reconciliation must find its orders and fills, as with a real
venue) and so that every process of a scale-out deployment sees one exchange. The
site's Order/Fill tables are never read by it. Numbers are fixed point (value x core.fixed_point.SCALE).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.fixed_point_field import FixedPointField


class PaperOrder(models.Model):
    account_key = models.CharField(max_length=40, help_text="The paper account (one per site account).")
    client_order_id = models.CharField(max_length=40)
    symbol = models.CharField(max_length=120)
    side = models.CharField(max_length=4)
    order_type = models.CharField(max_length=6)
    quantity = FixedPointField()
    price = FixedPointField(null=True, blank=True, help_text="Limit price; empty for market orders.")
    status = models.CharField(max_length=16, default="NEW")
    filled_quantity = FixedPointField(default=0)
    filled_notional = FixedPointField(default=0)
    created_ns = models.BigIntegerField()
    updated_ns = models.BigIntegerField()

    class Meta:
        constraints = [
            # The exchange refuses a second order with the same client id, as real venues do.
            models.UniqueConstraint(fields=["account_key", "client_order_id"], name="paperorder_unique_client_id"),
        ]
        indexes = [
            models.Index(fields=["symbol"], condition=Q(status__in=["NEW", "PARTIALLY_FILLED"]), name="paperorder_open")
        ]

    def __str__(self) -> str:
        return f"paper {self.client_order_id} ({self.status})"


class PaperFill(models.Model):
    order = models.ForeignKey(PaperOrder, on_delete=models.CASCADE, related_name="fills")
    quantity = FixedPointField()
    price = FixedPointField()
    fee = FixedPointField()
    ts_event = models.BigIntegerField()

    def __str__(self) -> str:
        return f"paper fill {self.pk} of {self.order_id}"
