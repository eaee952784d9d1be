"""Feeds, instruments and what the recorder wrote: the whole site's, so superusers only.

A feed's settings are checked against its venue's declared settings (feeds.settings_schema)
with JSON size and depth limits, so a malformed value is a form error.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from core.admin_scope import SuperuserOnlyAdmin
from core.fixed_point import fixed_to_str
from core.json_limits import BoundedJSONField
from feeds.models import Feed, Instrument, KnownHole, StreamCheckpoint, Subscription, Tick
from feeds.settings_schema import clean_feed_settings
from preferences.time_format import format_time, ns_to_datetime


class FeedForm(forms.ModelForm):
    settings = BoundedJSONField(help_text=Feed._meta.get_field("settings").help_text)

    class Meta:
        model = Feed
        fields = ["name", "venue", "market_type", "enabled", "settings"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        venue = cleaned.get("venue")
        if venue and "settings" in cleaned:
            try:
                cleaned["settings"] = clean_feed_settings(venue, cleaned["settings"])
            except ValidationError as exc:
                self.add_error(
                    "settings",
                    [
                        f"{key}: {'; '.join(messages)}" if key != "settings" else "; ".join(messages)
                        for key, messages in exc.message_dict.items()
                    ],
                )
        return cleaned


class InstrumentInline(admin.TabularInline):
    model = Instrument
    extra = 0
    show_change_link = True


@admin.register(Feed)
class FeedAdmin(SuperuserOnlyAdmin):
    form = FeedForm
    list_display = ["name", "venue", "market_type", "enabled", "created_at"]
    list_filter = ["venue", "market_type", "enabled"]
    search_fields = ["name"]
    inlines = [InstrumentInline]


class SubscriptionInline(admin.TabularInline):
    model = Subscription
    extra = 0


@admin.register(Instrument)
class InstrumentAdmin(SuperuserOnlyAdmin):
    list_display = ["symbol", "venue_symbol", "feed", "tick_size", "lot_size", "contract_multiplier"]
    list_filter = ["feed__venue", "feed"]
    search_fields = ["symbol", "venue_symbol"]
    list_select_related = ["feed"]
    inlines = [SubscriptionInline]


@admin.register(Subscription)
class SubscriptionAdmin(SuperuserOnlyAdmin):
    list_display = ["instrument", "channel", "enabled", "created_at"]
    list_filter = ["channel", "enabled", "instrument__feed"]
    search_fields = ["instrument__symbol", "instrument__venue_symbol"]
    list_select_related = ["instrument"]


def _ns_to_utc(ts_ns: int) -> str:
    # In the viewer's zone (UTC unless chosen otherwise), with the zone's name.
    return format_time(ns_to_datetime(ts_ns), "%Y-%m-%d %H:%M:%S.{ms} %Z")


class _ReadOnlyAdmin(SuperuserOnlyAdmin):
    """Rows the runtime writes; the admin only shows them."""

    def has_add_permission(self, request: Any, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
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
