"""Write paths of the site itself: housekeeping of login sessions."""

from __future__ import annotations

from datetime import datetime

from django.contrib.sessions.models import Session
from django.utils import timezone


def sessions_clear_expired(*, now: datetime | None = None) -> int:
    """Delete expired login sessions; return how many."""
    deleted, _ = Session.objects.filter(expire_date__lt=now or timezone.now()).delete()
    return deleted
