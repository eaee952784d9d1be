"""Typed query-string filters of the API lists (django-filter).

Every filter is a form field, so a value its column cannot hold is a 400 naming the
parameter, never a database error: ids are whole numbers inside the 64-bit key range,
choices are checked against the model's, and text is bounded and refuses NUL (which
PostgreSQL cannot store in a string literal).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet

from dashboard import selectors
from orders.models import Fill, Order, OrderStatus, Outcome, Position
from processor.models import StrategySignal

# Ids and foreign keys are 64-bit on PostgreSQL and SQLite; a larger number would fail in the database.
ID_MIN, ID_MAX = 1, 2**63 - 1


class IdFilter(django_filters.Filter):
    """A primary or foreign key: a whole number in the database's key range."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", ID_MIN)
        kwargs.setdefault("max_value", ID_MAX)
        super().__init__(*args, **kwargs)


def _text(field_name: str, max_length: int, help_text: str) -> django_filters.CharFilter:
    # forms.CharField refuses NUL bytes itself; max_length bounds what reaches the query.
    return django_filters.CharFilter(field_name=field_name, max_length=max_length, help_text=help_text)


class OrderFilter(django_filters.FilterSet):
    account = IdFilter(field_name="account_id", help_text="Only this account's orders.")
    status = django_filters.ChoiceFilter(choices=OrderStatus.choices, help_text="Only orders in this status.")
    client_order_id = _text("client_order_id", 40, "The order with this client order id.")

    class Meta:
        model = Order
        fields: list[str] = []


class FillFilter(django_filters.FilterSet):
    account = IdFilter(field_name="account_id", help_text="Only this account's fills.")
    order = IdFilter(field_name="order_id", help_text="Only this order's fills.")

    class Meta:
        model = Fill
        fields: list[str] = []


class PositionFilter(django_filters.FilterSet):
    account = IdFilter(field_name="account_id", help_text="Only this account's positions.")
    state = django_filters.ChoiceFilter(choices=Position.State.choices, help_text="OPEN or CLOSED.")

    class Meta:
        model = Position
        fields: list[str] = []


class SignalFilter(django_filters.FilterSet):
    strategy = IdFilter(field_name="strategy_id", help_text="Only this strategy's signals.")
    symbol = _text("symbol", 120, "Only signals on this symbol (the venue's spelling).")
    kind = django_filters.ChoiceFilter(choices=StrategySignal.Kind.choices, help_text="Only signals of this kind.")
    outcome = django_filters.ChoiceFilter(
        choices=Outcome.choices,
        method="filter_outcome",
        help_text="Only signals with this outcome on one of your accounts.",
    )

    class Meta:
        model = StrategySignal
        fields: list[str] = []

    def filter_outcome(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return selectors.signals_with_outcome(queryset, self.request.user, value)
