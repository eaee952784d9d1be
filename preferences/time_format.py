"""Times as the site shows them: in the viewer's zone, always with the zone's name.

The one helper behind the `when`, `clock` and `ns_when` template filters, the admin's
time columns and alert texts; static/site_time.js formats the live rows the same way.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, tzinfo

from django.utils import timezone

from preferences.models import DEFAULT_TIME_ZONE, UserPreference

FULL = "%Y-%m-%d %H:%M:%S %Z"
CLOCK = "%H:%M:%S %Z"
CLOCK_MS = "%H:%M:%S.{ms} %Z"


def zone_named(name: str) -> tzinfo:
    """The zone called `name`, or UTC for a name this machine does not know."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC


def user_time_zone_name(user_id: int | None) -> str:
    """The user's chosen zone (UTC by default and for anonymous visitors)."""
    if user_id is None:
        return DEFAULT_TIME_ZONE
    name = UserPreference.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first()
    return name or DEFAULT_TIME_ZONE


def format_time(moment: datetime | None, fmt: str = FULL, zone: tzinfo | None = None) -> str:
    """`moment` in `zone` (default: the active zone) with the zone's abbreviation; a dash for none."""
    if moment is None:
        return "–"
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(zone or timezone.get_current_timezone())
    if "{ms}" in fmt:
        fmt = fmt.replace("{ms}", f"{local.microsecond // 1000:03d}")
    return local.strftime(fmt)


def ns_to_datetime(ts_ns: int) -> datetime:
    seconds, nanos = divmod(int(ts_ns), 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000)
