"""Filters for the dashboard's exact numbers and nanosecond times."""

from __future__ import annotations

from django import template

from core.fixed_point import fixed_to_str
from orders.models import SignalOutcome
from orders.models.outcomes import NOT_SETTLED
from preferences.templatetags.times import ns_clock

register = template.Library()


@register.filter
def fixed(value: int | None) -> str:
    """A fixed-point integer (value x core.fixed_point.SCALE) as its exact decimal string."""
    return "–" if value is None else fixed_to_str(int(value))


@register.filter
def ns_time(value: int | None) -> str:
    """UTC nanoseconds as HH:MM:SS.mmm in the viewer's zone, with the zone's name."""
    return ns_clock(value)


@register.filter
def outcome_state(row: SignalOutcome) -> str:
    """How a signal outcome is drawn: traded, pending (still being decided) or not-traded."""
    if row.traded:
        return "traded"
    return "pending" if row.outcome in NOT_SETTLED else "not-traded"
