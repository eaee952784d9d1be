"""Strategies: a kind, validated params and the instruments they run on."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models

from core.fixed_point_field import FixedPointField
from feeds.market import fixed_to_decimal
from processor.strategies import clean_params, kind_choices


class Strategy(models.Model):
    name = models.SlugField(max_length=60, unique=True)
    kind = models.CharField(max_length=40, choices=kind_choices)
    params = models.JSONField(default=dict, help_text="Validated per kind, e.g. ema: timeframe_s, fast, slow.")
    enabled = models.BooleanField(default=True)
    instruments = models.ManyToManyField("feeds.Instrument", related_name="strategies", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "strategies"

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        try:
            self.params = clean_params(self.kind, self.params)
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                messages = [
                    f"{name}: {'; '.join(errs)}" if name != "__all__" else "; ".join(errs)
                    for name, errs in exc.message_dict.items()
                ]
            else:
                messages = exc.messages
            raise ValidationError({"params": messages}) from None


class StrategySignal(models.Model):
    """A signal as emitted; prices are fixed-point integers (feeds.market.SCALE_DIGITS)."""

    class Kind(models.TextChoices):
        ENTRY_LONG = "ENTRY_LONG"
        EXIT_LONG = "EXIT_LONG"
        ENTRY_SHORT = "ENTRY_SHORT"
        EXIT_SHORT = "EXIT_SHORT"

    # Kept when the strategy is deleted: a signal that may have traded is history.
    strategy = models.ForeignKey(Strategy, null=True, on_delete=models.SET_NULL, related_name="signals")
    strategy_name = models.CharField(max_length=60)
    feed = models.CharField(max_length=50)
    symbol = models.CharField(max_length=120, help_text="The venue's spelling.")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    price_fixed = FixedPointField(help_text="Price, fixed point.")
    emitted_at = models.DateTimeField(db_index=True, help_text="When the app emitted it.")
    occurrence_ns = models.BigIntegerField(help_text="Exchange time (UTC ns) of the tick that caused it.")
    output_id = models.CharField(max_length=64, help_text="The StrategyOutput it was derived from.")

    class Meta:
        ordering = ["-emitted_at", "-id"]
        indexes = [models.Index(fields=["strategy", "-emitted_at"], name="signal_strategy_time")]

    def __str__(self) -> str:
        return f"{self.strategy_name} {self.kind} {self.symbol} @ {self.price}"

    @property
    def price(self) -> Decimal:
        return fixed_to_decimal(self.price_fixed)


class StrategyOutputRecord(models.Model):
    """A stored strategy output: every output a signal links to, plus the latest per interval."""

    output_id = models.CharField(max_length=64, unique=True)
    strategy = models.ForeignKey(Strategy, null=True, on_delete=models.SET_NULL, related_name="outputs")
    strategy_name = models.CharField(max_length=60)
    feed = models.CharField(max_length=50)
    symbol = models.CharField(max_length=120)
    time_ns = models.BigIntegerField(help_text="Bucket or bar start (UTC ns).")
    occurrence_ns = models.BigIntegerField(help_text="Exchange time (UTC ns) of the tick that caused it.")
    values = models.JSONField(help_text="Decimal strings for prices, floats for indicators.")
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurrence_ns"]
        indexes = [models.Index(fields=["strategy", "feed", "symbol", "-occurrence_ns"], name="output_strategy_time")]

    def __str__(self) -> str:
        return f"{self.strategy_name} {self.symbol} {self.output_id}"
