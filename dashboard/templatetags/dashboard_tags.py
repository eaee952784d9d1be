"""Filters for the dashboard's exact numbers and nanosecond times."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

from core.fixed_point import fixed_to_str
from orders.models import SignalOutcome
from orders.models.outcomes import NOT_SETTLED

register = template.Library()


@register.filter
def fixed(value: int | None) -> str:
    """A fixed-point integer (value x core.fixed_point.SCALE) as its exact decimal string."""
    return "–" if value is None else fixed_to_str(int(value))


@register.filter
def ns_time(value: int | None) -> str:
    """UTC nanoseconds as HH:MM:SS.mmm."""
    if value is None:
        return "–"
    return datetime.fromtimestamp(int(value) / 1e9, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


@register.filter
def outcome_state(row: SignalOutcome) -> str:
    """How a signal outcome is drawn: traded, pending (still being decided) or not-traded."""
    if row.traded:
        return "traded"
    return "pending" if row.outcome in NOT_SETTLED else "not-traded"
