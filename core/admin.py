from django.contrib import admin
from django.http import HttpRequest

from core.admin_scope import SuperuserOnlyAdmin
from core.models import ComponentHealth


@admin.register(ComponentHealth)
class ComponentHealthAdmin(SuperuserOnlyAdmin):
    """Component health is the whole site's: superusers only."""

    list_display = ["component", "status", "reason", "process", "updated_at"]
    list_filter = ["status"]
    search_fields = ["component", "reason"]
    readonly_fields = [f.name for f in ComponentHealth._meta.fields]

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False
