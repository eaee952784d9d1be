"""The one filter that renders a page time (dashboard.times)."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from django import template

from dashboard.times import format_moment

register = template.Library()


@register.filter
def moment(value: datetime | None, zone: tzinfo | None = None) -> str:
    """`{{ when|moment:zone }}`: the time in `zone` (UTC without one), zone shown."""
    return format_moment(value, zone or UTC)
