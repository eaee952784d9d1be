"""The order lifecycle: intents, broker-confirmed orders, fills and positions.

An OrderIntent is written (with its capital reservation) before the broker is called,
so a crash at any later point leaves a durable record that reconciliation resolves by
asking the broker for that client order id. An Order exists only once the broker has
confirmed it (no lifecycle without a confirmed exchange order). Numbers are
fixed point (value x core.fixed_point.SCALE).
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from core.fixed_point_field import FixedPointField
from feeds.market import fixed_to_decimal


class OrderSide(models.TextChoices):
    BUY = "BUY"
    SELL = "SELL"


class OrderType(models.TextChoices):
    MARKET = "MARKET"
    LIMIT = "LIMIT"


class PositionSide(models.TextChoices):
    LONG = "LONG"
    SHORT = "SHORT"


class Intent(models.TextChoices):
    ENTRY = "ENTRY"
    EXIT = "EXIT"


class OrderStatus(models.TextChoices):
    # The broker acknowledged the order id and said nothing more (Upstox place returns
    # only the id); a report showing it working moves it to SUBMITTED.
    NEW = "NEW"
    SUBMITTED = "SUBMITTED"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    CANCELED = "CANCELED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"


TERMINAL_STATUSES = frozenset({OrderStatus.FILLED, OrderStatus.CANCELED, OrderStatus.REJECTED, OrderStatus.EXPIRED})


class OrderIntent(models.Model):
    """An order about to be sent, holding its reservation until the broker answers."""

    class State(models.TextChoices):
        PENDING = "PENDING", "Sent or about to be sent; outcome unknown"
        PLACED = "PLACED", "Confirmed by the broker; the Order row took over"
        ABANDONED = "ABANDONED", "Never reached the broker; reservation released"

    client_order_id = models.CharField(max_length=40, unique=True)
    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="intents")
    strategy = models.ForeignKey("processor.Strategy", null=True, on_delete=models.SET_NULL, related_name="+")
    instrument = models.ForeignKey("feeds.Instrument", on_delete=models.PROTECT, related_name="+")
    intent = models.CharField(max_length=5, choices=Intent.choices)
    position_side = models.CharField(max_length=5, choices=PositionSide.choices)
    side = models.CharField(max_length=4, choices=OrderSide.choices)
    order_type = models.CharField(max_length=6, choices=OrderType.choices)
    quantity = FixedPointField()
    price = FixedPointField(help_text="Limit price, or the signal's price for a market order.")
    reserved = FixedPointField(default=0, help_text="Capital reserved for this order (entries only).")
    state = models.CharField(max_length=9, choices=State.choices, default=State.PENDING)
    signal_kind = models.CharField(max_length=12, blank=True)
    signal_output_id = models.CharField(max_length=64, blank=True)
    # Set when the broker's answer was lost (timeout, 5xx) and cleared never: the
    # resolution path (reconciliation, lookup by client id, operator prompt) starts here.
    unresolved_since = models.DateTimeField(null=True, blank=True)
    # Set when no automatic path could resolve it and a person was asked to decide.
    operator_prompted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["account", "state"], name="intent_account_state")]
        constraints = [
            models.CheckConstraint(condition=Q(quantity__gt=0), name="intent_quantity_positive"),
            models.CheckConstraint(condition=Q(reserved__gte=0), name="intent_reserved_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.intent} {self.client_order_id} ({self.state})"


class Position(models.Model):
    """A strategy's position on one instrument in one account; CLOSED rows are history."""

    class State(models.TextChoices):
        OPEN = "OPEN"
        CLOSED = "CLOSED"

    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="positions")
    strategy = models.ForeignKey("processor.Strategy", null=True, on_delete=models.SET_NULL, related_name="+")
    instrument = models.ForeignKey("feeds.Instrument", on_delete=models.PROTECT, related_name="+")
    side = models.CharField(max_length=5, choices=PositionSide.choices)
    quantity = FixedPointField(default=0)
    cost = FixedPointField(default=0, help_text="Entry notional of the open quantity.")
    locked = FixedPointField(default=0, help_text="This position's share of reserved_for_positions.")
    realized_pnl = FixedPointField(default=0)
    state = models.CharField(max_length=6, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # The trade's figures, kept after it closes (quantity and cost fall to 0 then): the
    # fill handlers add to them in the transaction that books each fill.
    entry_quantity = FixedPointField(default=0, help_text="Quantity bought (long) or sold (short) to open.")
    entry_notional = FixedPointField(default=0, help_text="Notional of the entry fills.")
    exit_quantity = FixedPointField(default=0, help_text="Quantity closed by exit fills.")
    exit_notional = FixedPointField(default=0, help_text="Notional of the closing part of the exit fills.")
    fees = FixedPointField(default=0, help_text="Fees of every fill of this position (entry and exit).")
    entry_at = models.DateTimeField(null=True, blank=True, help_text="Broker time of the first entry fill.")
    exit_at = models.DateTimeField(null=True, blank=True, help_text="Broker time of the latest exit fill.")
    exit_reason = models.CharField(
        max_length=24, blank=True, help_text="The closing order's signal kind, or 'reconciliation'."
    )

    class Meta:
        ordering = ["-opened_at", "-id"]
        indexes = [
            # The closed-trade history and the performance aggregates: one account's
            # closed trades in exit order.
            models.Index(fields=["account", "state", "exit_at"], name="position_trade_history"),
            # The closed trades alone, in (exit time, id) order, carrying what the
            # performance figures read: the history pages seek in it (keyset paging) and
            # the aggregates and the drawdown read it without touching the table
            # (PostgreSQL; SQLite keeps the index without the included columns).
            models.Index(
                fields=["account", "exit_at", "id"],
                name="position_closed_trades",
                condition=Q(state="CLOSED", exit_at__isnull=False),
                include=["realized_pnl", "fees", "instrument", "strategy", "side"],
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "instrument", "strategy"],
                condition=Q(state="OPEN"),
                name="position_one_open_per_strategy",
            ),
            models.CheckConstraint(condition=Q(quantity__gte=0), name="position_quantity_non_negative"),
            models.CheckConstraint(condition=Q(locked__gte=0), name="position_locked_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.side} {fixed_to_decimal(self.quantity)} {self.instrument_id} ({self.state})"

    @property
    def average_price(self) -> Decimal | None:
        if not self.quantity:
            return None
        return (fixed_to_decimal(self.cost) / fixed_to_decimal(self.quantity)).normalize()


class Order(models.Model):
    """An order the broker confirmed, from acknowledgement to a terminal status."""

    client_order_id = models.CharField(max_length=40, unique=True)
    exchange_order_id = models.CharField(max_length=80, blank=True, db_index=True)
    intent_row = models.OneToOneField(OrderIntent, on_delete=models.PROTECT, related_name="order")
    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="orders")
    strategy = models.ForeignKey("processor.Strategy", null=True, on_delete=models.SET_NULL, related_name="+")
    instrument = models.ForeignKey("feeds.Instrument", on_delete=models.PROTECT, related_name="+")
    position = models.ForeignKey(Position, on_delete=models.PROTECT, related_name="orders")
    intent = models.CharField(max_length=5, choices=Intent.choices)
    side = models.CharField(max_length=4, choices=OrderSide.choices)
    order_type = models.CharField(max_length=6, choices=OrderType.choices)
    quantity = FixedPointField()
    price = FixedPointField()
    status = models.CharField(max_length=16, choices=OrderStatus.choices, default=OrderStatus.NEW)
    filled_quantity = FixedPointField(default=0)
    filled_notional = FixedPointField(default=0)
    reserved = FixedPointField(default=0, help_text="Reservation still held for the unfilled part.")
    reserve_released = FixedPointField(default=0, help_text="Reservation already released by fills.")
    via_reconciliation = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["account", "status"], name="order_account_status")]
        constraints = [
            models.CheckConstraint(condition=Q(quantity__gt=0), name="order_quantity_positive"),
            models.CheckConstraint(condition=Q(filled_quantity__gte=0), name="order_filled_non_negative"),
            models.CheckConstraint(condition=Q(filled_quantity__lte=F("quantity")), name="order_not_overfilled"),
            models.CheckConstraint(condition=Q(reserved__gte=0), name="order_reserved_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.side} {fixed_to_decimal(self.quantity)} {self.client_order_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def average_fill_price(self) -> Decimal | None:
        if not self.filled_quantity:
            return None
        return (fixed_to_decimal(self.filled_notional) / fixed_to_decimal(self.filled_quantity)).normalize()


class Fill(models.Model):
    """One execution reported by the broker; unique per account and trade id, so applying it twice is a no-op."""

    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="fills")
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="fills")
    exchange_trade_id = models.CharField(max_length=80)
    quantity = FixedPointField()
    price = FixedPointField()
    fee = FixedPointField(default=0)
    ts_event = models.BigIntegerField(help_text="Broker time of the execution, UTC ns.")
    via_reconciliation = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ts_event", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["account", "exchange_trade_id"], name="fill_unique_trade"),
            models.CheckConstraint(condition=Q(quantity__gt=0), name="fill_quantity_positive"),
        ]

    def __str__(self) -> str:
        return f"fill {self.exchange_trade_id} of {self.order_id}"
