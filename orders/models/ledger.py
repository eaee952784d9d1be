"""The capital ledger of an account and its append-only journal.

available = allocated_capital - reserved_for_orders - reserved_for_positions + realized_pnl.
Only orders.ledger changes these rows; every change writes one LedgerEntry whose deltas
sum, over the journal, to the ledger's fields. CHECK constraints keep every reservation
non-negative and `available` never below zero, whatever code path writes.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from core.fixed_point_field import FixedPointField
from feeds.market import fixed_to_decimal


class CapitalLedger(models.Model):
    """One account's capital, in fixed point (value x core.fixed_point.SCALE)."""

    account = models.OneToOneField("orders.Account", on_delete=models.CASCADE, related_name="ledger")
    allocated_capital = FixedPointField(default=0)
    reserved_for_orders = FixedPointField(default=0)
    reserved_for_positions = FixedPointField(default=0)
    realized_pnl = FixedPointField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(allocated_capital__gte=0), name="ledger_allocated_non_negative"),
            models.CheckConstraint(condition=Q(reserved_for_orders__gte=0), name="ledger_reserved_orders_non_negative"),
            models.CheckConstraint(
                condition=Q(reserved_for_positions__gte=0), name="ledger_reserved_positions_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(
                    allocated_capital__gte=F("reserved_for_orders") + F("reserved_for_positions") - F("realized_pnl")
                ),
                name="ledger_available_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"ledger of account {self.account_id}"

    @property
    def available(self) -> int:
        return self.allocated_capital - self.reserved_for_orders - self.reserved_for_positions + self.realized_pnl

    def as_decimals(self) -> dict[str, Decimal]:
        return {
            "allocated_capital": fixed_to_decimal(self.allocated_capital),
            "reserved_for_orders": fixed_to_decimal(self.reserved_for_orders),
            "reserved_for_positions": fixed_to_decimal(self.reserved_for_positions),
            "realized_pnl": fixed_to_decimal(self.realized_pnl),
            "available": fixed_to_decimal(self.available),
        }


class LedgerEntry(models.Model):
    """One journaled ledger change; never updated or deleted."""

    class Kind(models.TextChoices):
        ALLOCATE = "allocate", "Allocation changed"
        RESERVE = "reserve", "Reserved for an order"
        RELEASE = "release", "Order reservation released"
        ENTRY_FILL = "entry_fill", "Entry fill moved to positions"
        EXIT_FILL = "exit_fill", "Exit fill realized"
        FEE = "fee", "Fee charged"
        REBUILD = "rebuild", "Rebuilt from the broker"

    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="ledger_entries")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    delta_allocated = FixedPointField(default=0)
    delta_reserved_for_orders = FixedPointField(default=0)
    delta_reserved_for_positions = FixedPointField(default=0)
    delta_realized_pnl = FixedPointField(default=0)
    client_order_id = models.CharField(max_length=40, blank=True, db_index=True)
    exchange_trade_id = models.CharField(max_length=80, blank=True)
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["account_id", "id"]
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.kind} {self.client_order_id} on account {self.account_id}"
