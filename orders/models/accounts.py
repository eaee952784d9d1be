"""Trading accounts and the settings that let a strategy trade on one."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.fixed_point_field import stored_exactly
from orders.brokers.kinds import PAPER, broker_choices


class TradeMode(models.TextChoices):
    PAPER = "paper", "Paper"
    SANDBOX = "sandbox", "Sandbox / testnet"
    LIVE = "live", "Live"


class Account(models.Model):
    """A broker account owned by one user; everything account-scoped filters by owner."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="accounts")
    name = models.CharField(max_length=80)
    # Choices from the broker kinds (orders.brokers.kinds): a new kind needs no migration.
    broker = models.CharField(max_length=20, choices=broker_choices, default=PAPER)
    allocated_capital = models.DecimalField(
        max_digits=30, decimal_places=12, validators=[MinValueValidator(Decimal(0)), stored_exactly]
    )
    currency = models.CharField(max_length=10, default="USD")
    # Risk limits (orders.risk_limits): empty = no limit.
    max_open_positions = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Entries are refused while this many positions (or entries) are open on the account.",
    )
    daily_loss_limit = models.DecimalField(
        max_digits=30,
        decimal_places=12,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.000000000001")), stored_exactly],
        help_text="Realized loss since 00:00 UTC (fees included) that engages the account's kill switch.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="account_unique_name_per_owner"),
            models.CheckConstraint(
                condition=models.Q(allocated_capital__gte=0), name="account_allocated_capital_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.broker})"


class Reversal(models.TextChoices):
    # The exit is sent first; the opposite entry is placed once the exit has filled
    # (confirmed by the broker's fill, live or through reconciliation).
    AFTER_EXIT_FILL = "after_exit_fill", "Enter the other side once the exit has filled"
    # The opposite entry is refused (recorded as position_open) while the position is open.
    REFUSE = "refuse", "Refuse the opposite entry while a position is open"


class TradeSetting(models.Model):
    """Lets one strategy trade on one account with a fixed quantity per entry."""

    strategy = models.ForeignKey("processor.Strategy", on_delete=models.CASCADE, related_name="trade_settings")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="trade_settings")
    quantity = models.DecimalField(
        max_digits=30, decimal_places=12, validators=[MinValueValidator(Decimal("0.000000000001")), stored_exactly]
    )
    mode = models.CharField(max_length=10, choices=TradeMode.choices, default=TradeMode.PAPER)
    order_type = models.CharField(
        max_length=6,
        choices=[("MARKET", "Market"), ("LIMIT", "Limit at the signal price")],
        default="MARKET",
        help_text="Entries only; exits are always market orders.",
    )
    reversal = models.CharField(
        max_length=16,
        choices=Reversal.choices,
        default=Reversal.AFTER_EXIT_FILL,
        help_text="What an entry does when the strategy reverses (exit then opposite entry on one tick).",
    )
    enabled = models.BooleanField(default=True)
    # Exit levels in percent of the entry price, watched on ticks (orders.risk_watch): empty = none.
    stop_loss_pct = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.0001")), MaxValueValidator(Decimal("99.9999"))],
        help_text="Close when the price moves this many percent against the entry.",
    )
    take_profit_pct = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.0001")), MaxValueValidator(Decimal("999.9999"))],
        help_text="Close when the price moves this many percent in favour of the entry.",
    )
    trailing_stop_pct = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.0001")), MaxValueValidator(Decimal("99.9999"))],
        help_text="Close when the price falls back this many percent from its best since the entry.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["account_id", "strategy_id"]
        constraints = [
            models.UniqueConstraint(fields=["strategy", "account"], name="tradesetting_unique_strategy_account"),
            models.CheckConstraint(condition=models.Q(quantity__gt=0), name="tradesetting_quantity_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.strategy} on {self.account}"

    def clean(self) -> None:
        if not self.account_id:
            return
        paper_account = self.account.broker == PAPER
        if paper_account != (self.mode == TradeMode.PAPER):
            raise ValidationError(
                {"mode": "paper accounts trade in paper mode only, and paper mode needs a paper account"}
            )
