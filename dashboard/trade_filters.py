"""The filters of the closed-trade history, shared by its page, its CSV, the performance
figures and their API routes: one definition, so all four select the same trades.

Every filter is a form field: a value that cannot be used (a non-number id, a date that
is not one, `since` after `until`, text with NUL or too long) is a form error naming
the parameter (a 400), never a database error.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet

from dashboard.times import display_zone
from orders.models import Position, PositionSide

# Ids are 64-bit keys on PostgreSQL and SQLite; a larger number would fail in the database.
ID_MIN, ID_MAX = 1, 2**63 - 1
RESULTS = [("win", "Winners (P&L > 0)"), ("loss", "Losers (P&L < 0)"), ("even", "Break-even (P&L = 0)")]


class _IdFilter(django_filters.Filter):
    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", ID_MIN)
        kwargs.setdefault("max_value", ID_MAX)
        super().__init__(*args, **kwargs)


class _TradeFilterForm(forms.Form):
    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            raise forms.ValidationError({"until": "must be on or after since"})
        return cleaned


class TradeFilter(django_filters.FilterSet):
    """?account=&strategy=&symbol=&side=&result=&since=&until= (dates inclusive, in the display zone)."""

    account = _IdFilter(field_name="account_id", help_text="Only this account's trades.")
    strategy = _IdFilter(field_name="strategy_id", help_text="Only this strategy's trades.")
    symbol = django_filters.CharFilter(
        field_name="instrument__symbol", max_length=120, help_text="Only trades on this symbol."
    )
    side = django_filters.ChoiceFilter(choices=PositionSide.choices, help_text="LONG or SHORT.")
    result = django_filters.ChoiceFilter(choices=RESULTS, method="filter_result", help_text="win, loss or even.")
    since = django_filters.DateFilter(method="filter_since", help_text="Closed on or after this day (YYYY-MM-DD).")
    until = django_filters.DateFilter(method="filter_until", help_text="Closed on or before this day (YYYY-MM-DD).")

    class Meta:
        model = Position
        fields: list[str] = []
        form = _TradeFilterForm

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user = getattr(self.request, "user", None)
        self.zone: tzinfo = UTC if user is None else display_zone(user)

    def _start_of(self, day: date) -> datetime:
        return datetime.combine(day, time.min, tzinfo=self.zone)

    def filter_result(self, queryset: QuerySet[Position], name: str, value: str) -> QuerySet[Position]:
        lookup = {"win": "realized_pnl__gt", "loss": "realized_pnl__lt", "even": "realized_pnl"}[value]
        return queryset.filter(**{lookup: 0})

    def filter_since(self, queryset: QuerySet[Position], name: str, value: date) -> QuerySet[Position]:
        return queryset.filter(exit_at__gte=self._start_of(value))

    def filter_until(self, queryset: QuerySet[Position], name: str, value: date) -> QuerySet[Position]:
        if value >= date.max:
            return queryset
        return queryset.filter(exit_at__lt=self._start_of(value + timedelta(days=1)))
