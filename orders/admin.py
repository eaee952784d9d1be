"""Admin for accounts; staff who are not superusers see only their own accounts."""
from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from orders.models import Account, TradeSetting


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "broker", "allocated_capital", "currency"]
    list_filter = ["broker", "currency"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Account]:
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(owner=request.user)


@admin.register(TradeSetting)
class TradeSettingAdmin(admin.ModelAdmin):
    list_display = ["strategy", "account", "quantity", "mode", "enabled"]
    list_filter = ["mode", "enabled", "account__broker"]
    search_fields = ["strategy__name", "account__name"]
    list_select_related = ["strategy", "account"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[TradeSetting]:
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(account__owner=request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        if db_field.name == "account" and not request.user.is_superuser:
            kwargs["queryset"] = Account.objects.filter(owner=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
