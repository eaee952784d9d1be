from datetime import UTC

from django.contrib import admin

from core.fixed_point import fixed_to_str
from feeds.models import Feed, Instrument, KnownHole, StreamCheckpoint, Subscription, Tick


class InstrumentInline(admin.TabularInline):
    model = Instrument
    extra = 0
    show_change_link = True


@admin.register(Feed)
class FeedAdmin(admin.ModelAdmin):
    list_display = ["name", "venue", "market_type", "enabled", "created_at"]
    list_filter = ["venue", "market_type", "enabled"]
    search_fields = ["name"]
    inlines = [InstrumentInline]


class SubscriptionInline(admin.TabularInline):
    model = Subscription
    extra = 0


@admin.register(Instrument)
class InstrumentAdmin(admin.ModelAdmin):
    list_display = ["symbol", "venue_symbol", "feed", "tick_size", "lot_size", "contract_multiplier"]
    list_filter = ["feed__venue", "feed"]
    search_fields = ["symbol", "venue_symbol"]
    list_select_related = ["feed"]
    inlines = [SubscriptionInline]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["instrument", "channel", "enabled", "created_at"]
    list_filter = ["channel", "enabled", "instrument__feed"]
    search_fields = ["instrument__symbol", "instrument__venue_symbol"]
    list_select_related = ["instrument"]


def _ns_to_utc(ts_ns: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ts_ns / 1e9, tz=UTC).isoformat(timespec="milliseconds")


class _ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the runtime writes; the admin only shows them."""

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(Tick)
class TickAdmin(_ReadOnlyAdmin):
    list_display = ["instrument", "exchange_time", "price_text", "volume_text", "trade_id", "side"]
    list_filter = ["instrument__feed"]
    search_fields = ["instrument__symbol", "trade_id"]
    list_select_related = ["instrument"]
    show_full_result_count = False  # counting millions of ticks makes the page slow

    @admin.display(description="exchange time", ordering="ts_event")
    def exchange_time(self, tick: Tick) -> str:
        return _ns_to_utc(tick.ts_event)

    @admin.display(description="price")
    def price_text(self, tick: Tick) -> str:
        return fixed_to_str(tick.price)

    @admin.display(description="volume")
    def volume_text(self, tick: Tick) -> str:
        return fixed_to_str(tick.volume)


@admin.register(StreamCheckpoint)
class StreamCheckpointAdmin(_ReadOnlyAdmin):
    list_display = ["feed", "venue_symbol", "trade_id", "exchange_time", "updated_at"]
    list_filter = ["feed"]

    @admin.display(description="exchange time", ordering="ts_event")
    def exchange_time(self, checkpoint: StreamCheckpoint) -> str:
        return _ns_to_utc(checkpoint.ts_event)


@admin.register(KnownHole)
class KnownHoleAdmin(_ReadOnlyAdmin):
    list_display = ["feed", "venue_symbol", "hole_start", "hole_end", "reason", "detected_at"]
    list_filter = ["feed"]

    @admin.display(description="from", ordering="start_ns")
    def hole_start(self, hole: KnownHole) -> str:
        return _ns_to_utc(hole.start_ns)

    @admin.display(description="to", ordering="end_ns")
    def hole_end(self, hole: KnownHole) -> str:
        return _ns_to_utc(hole.end_ns)
