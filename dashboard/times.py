"""How the site shows a moment: in one time zone, with the zone written beside it.

Every page time of the trade history and performance pages goes through
`display_zone` and `format_moment` (the `moment` template filter), so a per-user time
zone changes one function. Until users choose one, it is UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


def display_zone(user: AbstractBaseUser | AnonymousUser) -> tzinfo:
    """The time zone `user` reads times in (UTC)."""
    return UTC


def format_moment(value: datetime | None, zone: tzinfo = UTC) -> str:
    """`2026-11-30 14:05:09 UTC`: seconds, and the zone's abbreviation; a dash for no time."""
    if value is None:
        return "–"
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
