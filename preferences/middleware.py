"""Activate the signed-in user's time zone for the request (UTC by default).

The zone's name is kept in the session after the first read, so a page costs no extra
query; the settings page writes both. The JSON API is left alone: it answers in UTC
whoever asks (ISO times with their offset), so a client's parsing never depends on a
page preference.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from preferences.models import DEFAULT_TIME_ZONE
from preferences.time_format import user_time_zone_name, zone_named

SESSION_KEY = "time_zone"
API_PREFIX = "/api/"


def time_zone_remember(request: HttpRequest, name: str) -> None:
    """Use `name` from this request on (the settings page calls this after saving)."""
    request.session[SESSION_KEY] = name
    request.time_zone_name = name  # type: ignore[attr-defined]
    timezone.activate(zone_named(name))


def _zone_name(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return DEFAULT_TIME_ZONE
    name = request.session.get(SESSION_KEY)
    if not isinstance(name, str):
        name = user_time_zone_name(user.pk)
        request.session[SESSION_KEY] = name
    return name


class UserTimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIX) and not request.path.startswith(API_PREFIX + "docs/"):
            return self.get_response(request)
        name = _zone_name(request)
        request.time_zone_name = name  # type: ignore[attr-defined]  # read by the context processor
        timezone.activate(zone_named(name))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def time_zone(request: HttpRequest) -> dict[str, str]:
    """Template context: the zone the page's times are in (base.html hands it to the JS)."""
    return {"time_zone_name": getattr(request, "time_zone_name", DEFAULT_TIME_ZONE)}
