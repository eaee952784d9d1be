"""`{% site_figures as figures %}`: the site-wide figures for a template (the health panel)."""

from __future__ import annotations

from typing import Any

from django import template

from tradingsite.site_figures import site_figures_field

register = template.Library()


@register.simple_tag
def site_figures() -> dict[str, Any] | None:
    figures: dict[str, Any] | None = site_figures_field(database_ok=True)["database"]
    return figures
