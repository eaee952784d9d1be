"""What one user may see of alerts: only their own channels and alerts."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from alerts.models import Alert, NotificationChannel


def channels_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[NotificationChannel]:
    return NotificationChannel.objects.filter(owner_id=user.pk)


def alerts_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Alert]:
    return Alert.objects.filter(owner_id=user.pk).select_related("channel")
