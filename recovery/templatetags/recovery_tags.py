"""`{% recovery_prompts %}`: the user's open auth prompts, for the dashboard."""

from __future__ import annotations

from typing import Any

from django import template

from recovery.prompts import prompt_payload
from recovery.selectors import prompts_open_for_user

register = template.Library()


@register.inclusion_tag("recovery/prompts.html", takes_context=True)
def recovery_prompts(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    prompts = [prompt_payload(p) for p in prompts_open_for_user(user)] if user is not None else []
    return {"prompts": prompts, "csrf_token": context.get("csrf_token")}
