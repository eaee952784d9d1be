"""What became of each signal on each account: traded with its order, or not traded with a reason.

One row per (signal, account); a signal that reached no account (no enabled trade
setting) has one row with no account. The row is written by the trade executor as it
decides, and updated when a later step settles it (a reversal entry placed once the
exit filled, an unknown broker outcome resolved by reconciliation).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Outcome(models.TextChoices):
    # Traded: a broker order exists for this signal (client_order_id says which).
    PLACED = "placed", "Traded"
    # Not (yet) settled: the executor is working on it, or waits for the exit of a reversal.
    IN_FLIGHT = "in_flight", "Being traded"
    WAITING_FOR_EXIT = "waiting_for_exit", "Waiting for the exit to fill (reversal)"
    UNKNOWN = "unknown", "Sent; broker outcome unknown, being resolved"
    # Not traded, with the reason.
    NO_TRADE_SETTING = "no_trade_setting", "No enabled trade setting"
    HALTED = "halted", "Entries halted (kill switch)"
    POSITION_OPEN = "position_open", "A position or entry is already open on this account and instrument"
    NO_POSITION = "no_position", "Nothing open to close"
    ALREADY_CLOSING = "already_closing", "The open quantity is already being closed"
    DUPLICATE = "duplicate", "Already handled (same signal seen twice)"
    QUANTITY_ZERO = "quantity_zero", "Quantity rounds to zero at the lot size"
    INSUFFICIENT_CAPITAL = "insufficient_capital", "Insufficient capital"
    LOCK_TIMEOUT = "lock_timeout", "Entry lock not free within its TTL"
    BROKER_NOT_CONFIGURED = "broker_not_configured", "Broker not configured"
    BROKER_REJECTED = "broker_rejected", "Broker rejected the order"
    EXIT_NOT_FILLED = "exit_not_filled", "The exit it reverses did not fill"
    ABANDONED = "abandoned", "The broker never received the order"
    NO_METADATA = "no_metadata", "Instrument metadata (tick size, lot size) not known yet"
    STOPPED = "stopped", "The runtime stopped before it was traded"
    FAILED = "failed", "Failed unexpectedly (see the audit log)"


SETTLED_TRADED = frozenset({Outcome.PLACED})
NOT_SETTLED = frozenset({Outcome.IN_FLIGHT, Outcome.WAITING_FOR_EXIT, Outcome.UNKNOWN})


class SignalOutcome(models.Model):
    """The one recorded outcome of a signal on an account."""

    signal_key = models.CharField(
        max_length=255, help_text="The signal's identity (strategy, feed, symbol, kind, time, output)."
    )
    account = models.ForeignKey(
        "orders.Account", null=True, blank=True, on_delete=models.CASCADE, related_name="signal_outcomes"
    )
    strategy = models.ForeignKey(
        "processor.Strategy", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    strategy_name = models.CharField(max_length=60)
    feed = models.CharField(max_length=50)
    symbol = models.CharField(max_length=120)
    signal_kind = models.CharField(max_length=12)
    # With signal_kind, the link to processor.StrategySignal (which the processor stores in batches).
    output_id = models.CharField(max_length=64, db_index=True)
    occurrence_ns = models.BigIntegerField(help_text="Exchange time (UTC ns) of the tick that caused the signal.")
    outcome = models.CharField(max_length=24, choices=Outcome.choices)
    reason = models.CharField(max_length=500, blank=True)
    client_order_id = models.CharField(max_length=40, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["account", "-created_at"], name="outcome_account_time")]
        constraints = [
            models.UniqueConstraint(
                fields=["signal_key", "account"],
                condition=Q(account__isnull=False),
                name="outcome_one_per_signal_account",
            ),
            models.UniqueConstraint(
                fields=["signal_key"], condition=Q(account__isnull=True), name="outcome_one_per_unrouted_signal"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.signal_kind} {self.symbol} on {self.account_id}: {self.outcome}"

    @property
    def traded(self) -> bool:
        return self.outcome in SETTLED_TRADED
