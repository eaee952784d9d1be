from django.contrib import admin

from processor.models import Strategy


@admin.register(Strategy)
class StrategyAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    filter_horizontal = ["instruments"]
