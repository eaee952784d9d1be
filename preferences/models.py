"""Per-user display preferences."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.db import models

DEFAULT_TIME_ZONE = "UTC"


def time_zone_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(zoneinfo.available_timezones())]


class UserPreference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # Every time on the site is shown in this zone, with its abbreviation.
    time_zone = models.CharField(max_length=64, default=DEFAULT_TIME_ZONE)

    def __str__(self) -> str:
        return f"{self.user} ({self.time_zone})"
