from __future__ import annotations

from typing import Any

from django import template

from dashboard.health_advice import health_advice

register = template.Library()


@register.filter
def advice(view: Any) -> str:
    """What to do about a component view (core.selectors.ComponentView) that is not healthy."""
    return health_advice(view.component, view.status, view.reason)
