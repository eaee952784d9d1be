"""Write paths of the alerts app: channels (create, change, delete) and a test message."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from alerts.channels import channel_url_check, channel_url_encrypt
from alerts.models import Alert, AlertKind, NotificationChannel

KIND_FIELDS = ("notify_fills", "notify_kill_switches", "notify_health", "notify_broker_login")


def channel_create(*, owner_id: int, name: str, url: str, enabled: bool = True, **kinds: bool) -> NotificationChannel:
    """Store a new channel; the URL is checked (ChannelUrlRefused) and encrypted."""
    display = channel_url_check(url)
    with transaction.atomic():  # a duplicate name (IntegrityError) rolls back only this insert
        return NotificationChannel.objects.create(
            owner_id=owner_id,
            name=name,
            url_ciphertext=channel_url_encrypt(url),
            url_display=display,
            enabled=enabled,
            **{field: bool(kinds.get(field, False)) for field in KIND_FIELDS},
        )


def channel_update(*, channel: NotificationChannel, name: str, url: str = "", enabled: bool, **kinds: bool) -> None:
    """Change a channel; an empty `url` keeps the stored one."""
    changes: dict[str, Any] = {"name": name, "enabled": enabled}
    changes.update({field: bool(kinds.get(field, False)) for field in KIND_FIELDS})
    if url.strip():
        changes["url_display"] = channel_url_check(url)
        changes["url_ciphertext"] = channel_url_encrypt(url)
    with transaction.atomic():
        NotificationChannel.objects.filter(pk=channel.pk).update(**changes)


def channel_send_test(*, channel: NotificationChannel) -> Alert:
    """Queue a test message on `channel` (delivered by the next delivery run)."""
    now = timezone.now()
    return Alert.objects.create(
        owner_id=channel.owner_id,
        channel=channel,
        kind=AlertKind.TEST,
        source=f"test:{now.timestamp():.6f}",
        title="tradingsite test message",
        body=f"Alerts for {channel.name} arrive here.",
        next_attempt_at=now,
    )
