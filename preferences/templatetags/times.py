"""Time filters: every time in the viewer's zone, with the zone's name."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from preferences.time_format import CLOCK, CLOCK_MS, FULL, format_time, ns_to_datetime

register = template.Library()


@register.filter
def when(value: datetime | None) -> str:
    """Date, time and zone: 2026-12-01 18:42:07 UTC."""
    return format_time(value, FULL)


@register.filter
def clock(value: datetime | None) -> str:
    """Time of day and zone: 18:42:07 UTC."""
    return format_time(value, CLOCK)


@register.filter
def ns_clock(value: int | None) -> str:
    """UTC nanoseconds as the time of day in the viewer's zone, to the millisecond."""
    return "–" if value is None else format_time(ns_to_datetime(value), CLOCK_MS)


@register.filter
def ns_when(value: int | None) -> str:
    """UTC nanoseconds as date, time and zone."""
    return "–" if value is None else format_time(ns_to_datetime(value), FULL)


@register.simple_tag
def now_when() -> str:
    """The present moment, as `when` shows a time."""
    return format_time(timezone.now(), FULL)
