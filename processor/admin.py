"""Strategies and their history in the admin.

A strategy trades for every account that has a trade setting on it, so only superusers
add, change or delete strategies; a staff user who is not a superuser sees (read-only)
the strategies their accounts trade, and only those strategies' signals and outputs.
Params are checked against the kind's declared parameters with JSON types.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin_scope import BoundedChoicesAdmin, is_superuser
from core.json_limits import BoundedJSONField
from processor.models import Strategy, StrategyOutputRecord, StrategySignal
from processor.params_schema import clean_strategy_params

# The lookup from a strategy to the users whose accounts trade it.
_TRADERS = "trade_settings__account__owner"


def _strategies_traded_by(request: HttpRequest) -> QuerySet[Strategy]:
    return Strategy.objects.filter(**{_TRADERS: request.user.pk}).values("pk")  # type: ignore[return-value]


class StrategyForm(forms.ModelForm):
    params = BoundedJSONField(help_text=Strategy._meta.get_field("params").help_text)

    class Meta:
        model = Strategy
        fields = ["name", "kind", "params", "enabled", "instruments"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind, params = cleaned.get("kind"), cleaned.get("params")
        if kind and "params" in cleaned:
            try:
                cleaned["params"] = clean_strategy_params(kind, params)
            except ValidationError as exc:
                self.add_error("params", exc)
        return cleaned


class _SuperuserChanges(BoundedChoicesAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_superuser(request) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_delete_permission(request, obj)


@admin.register(Strategy)
class StrategyAdmin(_SuperuserChanges):
    form = StrategyForm
    list_display = ["name", "kind", "enabled", "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    filter_horizontal = ["instruments"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Strategy]:
        queryset = super().get_queryset(request)
        return queryset if is_superuser(request) else queryset.filter(pk__in=_strategies_traded_by(request))


class _History(admin.ModelAdmin):
    """Signals and outputs are history: read-only, scoped by the strategies the user trades."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        return queryset if is_superuser(request) else queryset.filter(strategy__in=_strategies_traded_by(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_delete_permission(request, obj)


@admin.register(StrategySignal)
class StrategySignalAdmin(_History):
    list_display = ["emitted_at", "strategy_name", "symbol", "kind", "price", "output_id"]
    list_filter = ["kind", "strategy_name"]
    search_fields = ["strategy_name", "symbol", "output_id"]
    date_hierarchy = "emitted_at"


@admin.register(StrategyOutputRecord)
class StrategyOutputRecordAdmin(_History):
    list_display = ["recorded_at", "strategy_name", "symbol", "output_id", "values"]
    list_filter = ["strategy_name"]
    search_fields = ["strategy_name", "symbol", "output_id"]
