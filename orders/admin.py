"""Admin for accounts; staff who are not superusers see and change only their own accounts.

An account's owner can be changed by superusers only, and every change of owner is
written to the control audit.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from core.admin_scope import OwnerScopedAdmin, is_superuser, owner_change
from core.fixed_point import fixed_to_str
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
from orders.trade_figures import entry_price, exit_price
from preferences.templatetags.times import ns_when


@admin.register(Account)
class AccountAdmin(OwnerScopedAdmin):
    list_display = ["name", "owner", "broker", "allocated_capital", "currency"]
    list_filter = ["broker", "currency"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner"]
    owner_path = "owner"
    owned_choices = {"owner": "pk"}

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    def save_model(self, request: HttpRequest, obj: Account, form: ModelForm, change: bool) -> None:
        before = Account.objects.filter(pk=obj.pk).values_list("owner_id", flat=True).first() if change else None
        if not is_superuser(request):
            # The choice list offers only the user; this holds even for a hand-made POST.
            obj.owner = get_user_model().objects.get(pk=request.user.pk or 0)
        super().save_model(request, obj, form, change)
        if change and before != obj.owner_id:
            owner_change(
                request=request,
                obj=obj,
                target=f"account {obj.name}",
                before_id=before,
                after_id=obj.owner_id,
                account_id=obj.pk,
            )


@admin.register(TradeSetting)
class TradeSettingAdmin(OwnerScopedAdmin):
    list_display = ["strategy", "account", "quantity", "mode", "enabled"]
    list_filter = ["mode", "enabled", "account__broker"]
    search_fields = ["strategy__name", "account__name"]
    list_select_related = ["strategy", "account"]
    owner_path = "account__owner"
    owned_choices = {"account": "owner"}


class OwnedByAccountAdmin(OwnerScopedAdmin):
    """Read-only views of account-scoped rows; staff who are not superusers see only their own accounts."""

    owner_path = "account__owner"

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
    list_display = ["exchange_trade_id", "order", "account", "fill_time"]
    search_fields = ["exchange_trade_id"]
    readonly_fields = ["fill_time"]

    @admin.display(description="fill time", ordering="ts_event")
    def fill_time(self, fill: Fill) -> str:
        # ts_event is UTC nanoseconds: shown as a date and time in the viewer's zone.
        return ns_when(fill.ts_event)


@admin.register(Position)
class PositionAdmin(OwnedByAccountAdmin):
    list_display = [
        "account",
        "instrument",
        "strategy",
        "side",
        "state",
        "opened_at",
        "entry_at",
        "exit_at",
        "trade_quantity",
        "trade_entry_price",
        "trade_exit_price",
        "trade_pnl",
        "exit_reason",
    ]
    list_filter = ["state", "side"]
    list_select_related = ["account", "instrument", "strategy"]
    readonly_fields = ["trade_quantity", "trade_entry_price", "trade_exit_price", "trade_fees", "trade_pnl"]

    @admin.display(description="entry quantity")
    def trade_quantity(self, position: Position) -> str:
        return fixed_to_str(position.entry_quantity)

    @admin.display(description="entry price")
    def trade_entry_price(self, position: Position) -> str:
        return str(entry_price(position) or "-")

    @admin.display(description="exit price")
    def trade_exit_price(self, position: Position) -> str:
        return str(exit_price(position) or "-")

    @admin.display(description="fees")
    def trade_fees(self, position: Position) -> str:
        return fixed_to_str(position.fees)

    @admin.display(description="realized P&L")
    def trade_pnl(self, position: Position) -> str:
        return fixed_to_str(position.realized_pnl)


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
        queryset = admin.ModelAdmin.get_queryset(self, request)  # not the account filter: see above
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=signal_outcomes_for_user(request.user).values("pk"))
