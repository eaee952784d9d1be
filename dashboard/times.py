"""How the trade history and performance pages show a moment: in the viewer's zone, named.

The pages, their CSV and their date filters take the viewer's zone once per request
(`display_zone`) and format through the site's one time helper (preferences.time_format).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from preferences.time_format import FULL, format_time, user_time_zone_name, zone_named


def display_zone(user: AbstractBaseUser | AnonymousUser) -> tzinfo:
    """The time zone `user` reads times in (their setting; UTC by default)."""
    if not user.is_authenticated:
        return UTC
    return zone_named(user_time_zone_name(user.pk))


def format_moment(value: datetime | None, zone: tzinfo = UTC) -> str:
    """`2026-11-30 14:05:09 UTC`: seconds, and the zone's abbreviation; a dash for no time."""
    return format_time(value, FULL, zone)
