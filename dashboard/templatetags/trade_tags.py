"""Filters of the trade history and performance pages."""

from __future__ import annotations

from decimal import Decimal

from django import template

from dashboard.performance import decimal_text as _decimal_text

register = template.Library()


@register.filter
def decimal_text(value: Decimal | None) -> str:
    """An exact Decimal without exponent or trailing zeros; a dash for none."""
    return "–" if value is None else _decimal_text(value)
