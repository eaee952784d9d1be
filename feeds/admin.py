from django.contrib import admin

from feeds.models import Feed, Instrument, Subscription


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
