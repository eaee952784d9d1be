from django.contrib import admin

from processor.models import Strategy, StrategyOutputRecord, StrategySignal


@admin.register(Strategy)
class StrategyAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    filter_horizontal = ["instruments"]


@admin.register(StrategySignal)
class StrategySignalAdmin(admin.ModelAdmin):
    """Signals are history: read-only."""

    list_display = ["emitted_at", "strategy_name", "symbol", "kind", "price", "output_id"]
    list_filter = ["kind", "strategy_name"]
    search_fields = ["strategy_name", "symbol", "output_id"]
    date_hierarchy = "emitted_at"

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(StrategyOutputRecord)
class StrategyOutputRecordAdmin(admin.ModelAdmin):
    list_display = ["recorded_at", "strategy_name", "symbol", "output_id", "values"]
    list_filter = ["strategy_name"]
    search_fields = ["strategy_name", "symbol", "output_id"]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
