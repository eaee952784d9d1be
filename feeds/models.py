"""Feeds, their instruments and what is subscribed."""
from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from feeds.venues import get_venue, venue_choices

_positive = MinValueValidator(Decimal("0.00000001"))


class MarketType(models.TextChoices):
    SPOT = "spot", "Spot"
    PERPETUAL = "perpetual", "Perpetual futures"
    FUTURES = "futures", "Dated futures"
    EQUITY = "equity", "Equity"
    SIMULATED = "simulated", "Simulated"


class Feed(models.Model):
    """One connection family to one venue; `runfeed --feed NAME` runs it."""

    name = models.SlugField(max_length=50, unique=True)
    venue = models.CharField(max_length=40, choices=venue_choices)
    market_type = models.CharField(max_length=20, choices=MarketType.choices)
    enabled = models.BooleanField(default=True)
    settings = models.JSONField(
        default=dict, blank=True, help_text="Venue-specific options; validated by the venue."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            self.settings = get_venue(self.venue).clean_settings(self.settings or {})
        except LookupError as exc:
            raise ValidationError({"venue": str(exc)}) from None
        except ValidationError as exc:
            raise ValidationError(
                {"settings": [f"{key}: {'; '.join(msgs)}" for key, msgs in exc.message_dict.items()]}
            ) from None


class Instrument(models.Model):
    feed = models.ForeignKey(Feed, on_delete=models.CASCADE, related_name="instruments")
    symbol = models.CharField(
        max_length=60,
        validators=[RegexValidator(r"^[A-Z0-9][A-Z0-9._/-]*$", "Upper-case letters, digits and . _ / -")],
        help_text="Our name, such as BTC-USDT.",
    )
    venue_symbol = models.CharField(max_length=120, help_text="The venue's spelling, such as BTCUSDT.")
    tick_size = models.DecimalField(max_digits=30, decimal_places=12, validators=[_positive])
    lot_size = models.DecimalField(max_digits=30, decimal_places=12, validators=[_positive])
    contract_multiplier = models.DecimalField(
        max_digits=30, decimal_places=12, default=Decimal(1), validators=[_positive]
    )

    class Meta:
        ordering = ["feed__name", "symbol"]
        constraints = [
            models.UniqueConstraint(fields=["feed", "venue_symbol"], name="instrument_unique_venue_symbol"),
            models.UniqueConstraint(fields=["feed", "symbol"], name="instrument_unique_symbol"),
        ]

    def __str__(self) -> str:
        return f"{self.symbol} ({self.feed_id and self.feed.name})"


class Subscription(models.Model):
    """An instrument channel the feed streams while the subscription is enabled."""

    instrument = models.ForeignKey(Instrument, on_delete=models.CASCADE, related_name="subscriptions")
    channel = models.CharField(max_length=30, default="trades")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["instrument__symbol", "channel"]
        constraints = [
            models.UniqueConstraint(fields=["instrument", "channel"], name="subscription_unique_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.instrument.symbol}:{self.channel}"

    def clean(self) -> None:
        if not self.instrument_id:
            return
        channels = get_venue(self.instrument.feed.venue).channels
        if self.channel not in channels:
            raise ValidationError(
                {"channel": f"{self.instrument.feed.venue} serves {', '.join(sorted(channels))}"}
            )
