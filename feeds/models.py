"""Feeds, their instruments and what is subscribed."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from core.fixed_point_field import FixedPointField
from feeds.venues import get_venue, venue_choices

_positive = MinValueValidator(Decimal("0.000000000001"))  # one unit at core.fixed_point.SCALE


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
    settings = models.JSONField(default=dict, blank=True, help_text="Venue-specific options; validated by the venue.")
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
    # The metadata gate reads these two: an instrument of a venue that lists its metadata
    # is streamed and traded only while the venue's listing confirmed it recently.
    metadata_refreshed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the venue's listing last confirmed the tick size, lot size and multiplier; "
        "empty until then (or once the venue stops listing the instrument).",
    )
    metadata_problem = models.CharField(
        max_length=300,
        blank=True,
        help_text="Why the last metadata fetch did not confirm it (empty when it did).",
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
            raise ValidationError({"channel": f"{self.instrument.feed.venue} serves {', '.join(sorted(channels))}"})


class Tick(models.Model):
    """One recorded trade print, written by the recorder (COPY on PostgreSQL).

    Numbers are fixed-point integers at core.fixed_point.SCALE (core.fixed_point_field:
    numeric(38,0) on PostgreSQL, a 64-bit integer on SQLite, which keeps only 15
    significant digits of a DecimalField). Times are integer UTC nanoseconds.
    """

    instrument = models.ForeignKey(Instrument, on_delete=models.CASCADE, related_name="ticks")
    ts_event = models.BigIntegerField(help_text="Exchange time of the trade, UTC ns.")
    ts_recv = models.BigIntegerField(help_text="When this process received it, UTC ns.")
    price = FixedPointField(help_text="Price, fixed point.")
    volume = FixedPointField(help_text="This trade's quantity, fixed point.")
    duration_since_last_ns = models.BigIntegerField(
        null=True, blank=True, help_text="Exchange time since the previous trade of the instrument, ns."
    )
    trade_id = models.CharField(max_length=64, blank=True)
    side = models.CharField(max_length=4, blank=True, help_text="Aggressor side: buy, sell or empty.")

    class Meta:
        indexes = [models.Index(fields=["instrument", "ts_event"], name="tick_instrument_ts")]
        # A venue's trade id names one trade of an instrument: the same trade recorded twice
        # (two processes overlapping at a takeover, a replayed gap) is kept once. Trades
        # without an id (some venues give none) are not constrained.
        constraints = [
            models.UniqueConstraint(
                fields=["instrument", "trade_id"],
                condition=~models.Q(trade_id=""),
                name="tick_unique_trade_id",
            )
        ]

    def __str__(self) -> str:
        return f"{self.instrument_id}@{self.ts_event}#{self.trade_id}"


class StreamCheckpoint(models.Model):
    """The last recorded trade of one venue symbol on one feed: where gap recovery starts.

    The consistency layer owns the live checkpoint; this row is its persisted copy,
    written by the recorder in the same transaction as the ticks it covers, so after a
    crash the checkpoint is never ahead of what the database holds.
    """

    feed = models.ForeignKey(Feed, on_delete=models.CASCADE, related_name="checkpoints")
    venue_symbol = models.CharField(max_length=120)
    trade_id = models.CharField(max_length=64, blank=True)
    ts_event = models.BigIntegerField(help_text="Exchange time of the trade, UTC ns.")
    price = FixedPointField()
    volume = FixedPointField()
    side = models.CharField(max_length=4, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["feed", "venue_symbol"], name="checkpoint_unique_symbol"),
        ]

    def __str__(self) -> str:
        return f"{self.feed_id}:{self.venue_symbol}#{self.trade_id}"


class KnownHole(models.Model):
    """A stretch of trades that could not be recovered (older than the venue's retention).

    Recorded so that a gap is visible and bounded, never silently skipped.
    """

    feed = models.ForeignKey(Feed, on_delete=models.CASCADE, related_name="known_holes")
    venue_symbol = models.CharField(max_length=120)
    start_ns = models.BigIntegerField(help_text="Exchange time of the last trade before the hole, UTC ns.")
    end_ns = models.BigIntegerField(help_text="Earliest time recovery could still reach, UTC ns.")
    reason = models.CharField(max_length=200)
    detected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-detected_at"]

    def __str__(self) -> str:
        return f"{self.feed_id}:{self.venue_symbol} hole {self.start_ns}..{self.end_ns}"


class MinuteCandle(models.Model):
    """One instrument's OHLCV of one exchange-time minute, rolled up from its recorded ticks.

    Kept by database triggers on the tick table (feeds.recording.minute_candles), in the
    statement that inserts the ticks: every writer (COPY, the staging path, bulk_create)
    keeps it, and a tick skipped as already recorded is never counted. Open and close
    are the first and last tick by (ts_event, trade id in numeric order, id), the order
    charts and backfill read ticks in; their keys are kept so that a later batch holding
    an earlier tick (ticks arrive out of order) replaces the open.
    """

    instrument = models.ForeignKey(Instrument, on_delete=models.CASCADE, related_name="minute_candles")
    minute = models.BigIntegerField(help_text="ts_event // 60 s: the minute since the Unix epoch.")
    open = FixedPointField()
    high = FixedPointField()
    low = FixedPointField()
    close = FixedPointField()
    volume = FixedPointField()
    trades = models.BigIntegerField()
    open_ts = models.BigIntegerField(help_text="The open tick's exchange time, UTC ns.")
    open_trade_id = models.CharField(max_length=64, blank=True)
    open_tick_id = models.BigIntegerField()
    close_ts = models.BigIntegerField(help_text="The close tick's exchange time, UTC ns.")
    close_trade_id = models.CharField(max_length=64, blank=True)
    close_tick_id = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instrument", "minute"], name="minute_candle_unique")]

    def __str__(self) -> str:
        return f"{self.instrument_id}@{self.minute}"
