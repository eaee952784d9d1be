"""Activate the signed-in user's time zone for the request (UTC by default)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from preferences.time_format import user_time_zone_name, zone_named


class UserTimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        name = user_time_zone_name(user.pk if user is not None and user.is_authenticated else None)
        request.time_zone_name = name  # type: ignore[attr-defined]  # read by the context processor
        timezone.activate(zone_named(name))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def time_zone(request: HttpRequest) -> dict[str, str]:
    """Template context: the zone the page's times are in (base.html hands it to the JS)."""
    return {"time_zone_name": getattr(request, "time_zone_name", "UTC")}
