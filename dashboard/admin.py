"""Kill switches and the control audit in the admin: read-only, changes go through the dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from dashboard.models import ControlAudit, KillSwitch


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(KillSwitch)
class KillSwitchAdmin(_ReadOnly):
    list_display = ["scope", "account", "engaged", "reason", "changed_by", "changed_at"]
    list_filter = ["engaged"]
    search_fields = ["scope", "account__name", "reason"]


@admin.register(ControlAudit)
class ControlAuditAdmin(_ReadOnly):
    list_display = ["created_at", "actor_name", "action", "target", "account", "reason"]
    list_filter = ["action"]
    search_fields = ["actor_name", "target", "reason"]
    date_hierarchy = "created_at"
