"""Admin for accounts; staff who are not superusers see only their own accounts."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from orders.models import (
    Account,
    AuditEvent,
    CapitalLedger,
    Fill,
    LedgerEntry,
    Order,
    Position,
    SignalOutcome,
    TradeSetting,
)
from orders.selectors import signal_outcomes_for_user


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


class OwnedByAccountAdmin(admin.ModelAdmin):
    """Read-only views of account-scoped rows; staff who are not superusers see only their own accounts."""

    account_path = "account__owner"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(**{self.account_path: request.user})

    # The lifecycle changes only through its handlers (orders.lifecycle), never by hand.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Order)
class OrderAdmin(OwnedByAccountAdmin):
    list_display = ["client_order_id", "account", "intent", "side", "order_type", "status", "created_at"]
    list_filter = ["status", "intent", "side"]
    search_fields = ["client_order_id", "exchange_order_id"]
    list_select_related = ["account"]


@admin.register(Fill)
class FillAdmin(OwnedByAccountAdmin):
    list_display = ["exchange_trade_id", "order", "account", "ts_event"]
    search_fields = ["exchange_trade_id"]


@admin.register(Position)
class PositionAdmin(OwnedByAccountAdmin):
    list_display = ["account", "instrument", "strategy", "side", "state", "opened_at"]
    list_filter = ["state", "side"]


@admin.register(CapitalLedger)
class CapitalLedgerAdmin(OwnedByAccountAdmin):
    list_display = ["account", "updated_at"]
    readonly_fields = ["balances"]

    @admin.display(description="balances")
    def balances(self, ledger: CapitalLedger) -> str:
        return ", ".join(f"{name} {value}" for name, value in ledger.as_decimals().items())


@admin.register(LedgerEntry)
class LedgerEntryAdmin(OwnedByAccountAdmin):
    list_display = ["account", "kind", "client_order_id", "created_at"]
    list_filter = ["kind"]


@admin.register(AuditEvent)
class AuditEventAdmin(OwnedByAccountAdmin):
    list_display = ["event", "account", "client_order_id", "message", "created_at"]
    list_filter = ["event"]
    search_fields = ["client_order_id"]


@admin.register(SignalOutcome)
class SignalOutcomeAdmin(OwnedByAccountAdmin):
    """What became of each signal; written only by orders.outcomes, so read-only here."""

    list_display = [
        "created_at",
        "strategy_name",
        "symbol",
        "signal_kind",
        "account",
        "outcome",
        "reason",
        "client_order_id",
    ]
    # RelatedOnly: the sidebar must not list other users' accounts.
    list_filter = [
        "outcome",
        "signal_kind",
        ("account", admin.RelatedOnlyFieldListFilter),
        ("strategy", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["client_order_id", "output_id", "signal_key", "strategy_name", "symbol"]
    list_select_related = ["account", "strategy"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[SignalOutcome]:
        # Unlike the other account rows, a signal that reached no account has no owner: staff
        # see it when their accounts trade its strategy (as on the dashboard and the API).
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=signal_outcomes_for_user(request.user).values("pk"))
