from django.contrib import admin

from core.models import ComponentHealth


@admin.register(ComponentHealth)
class ComponentHealthAdmin(admin.ModelAdmin):
    list_display = ["component", "status", "reason", "process", "updated_at"]
    list_filter = ["status"]
    search_fields = ["component", "reason"]
    readonly_fields = [f.name for f in ComponentHealth._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
