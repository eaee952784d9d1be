"""Template helpers of the health panel: the reporting processes behind its rows."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from core.selectors import ComponentView, ProcessView, process_views

register = template.Library()


@register.simple_tag
def health_processes(components: Iterable[ComponentView] | None) -> list[ProcessView]:
    return process_views(components or [])
