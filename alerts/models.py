"""Notification channels (one apprise URL each, stored encrypted) and the alerts sent through them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AlertKind(models.TextChoices):
    FILL = "fill", "Fill"
    KILL_SWITCH = "kill_switch", "Kill switch"
    HEALTH = "health", "Degraded health"
    BROKER_LOGIN = "broker_login", "Broker login needed"
    TEST = "test", "Test message"


class NotificationChannel(models.Model):
    """Where one user's alerts go, and which kinds of alert they want there."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_channels")
    name = models.CharField(max_length=80)
    # The apprise URL carries the secret (a bot token, a password): encrypted with the
    # broker-token keys, never rendered; `url_display` is apprise's privacy-masked form.
    url_ciphertext = models.TextField()
    url_display = models.CharField(max_length=300)
    enabled = models.BooleanField(default=True)
    notify_fills = models.BooleanField(default=True)
    notify_kill_switches = models.BooleanField(default=True)
    notify_health = models.BooleanField(default=True, help_text="Staff only: components that turn DEGRADED or BLOCKED.")
    notify_broker_login = models.BooleanField(default=True, help_text="Broker logins to renew (Upstox: daily).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="alert_channel_name_per_owner")]

    def __str__(self) -> str:
        return f"{self.name} ({self.url_display})"

    def wants(self, kind: str) -> bool:
        return {
            AlertKind.FILL: self.notify_fills,
            AlertKind.KILL_SWITCH: self.notify_kill_switches,
            AlertKind.HEALTH: self.notify_health,
            AlertKind.BROKER_LOGIN: self.notify_broker_login,
            AlertKind.TEST: True,
        }.get(AlertKind(kind), False)


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (gave up)"


class Alert(models.Model):
    """One event for one channel: what it said and how its delivery went."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alerts")
    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    # What raised it ("fill:42"): one alert per event and channel, however often collected.
    source = models.CharField(max_length=120)
    title = models.CharField(max_length=200)
    body = models.TextField()
    state = models.CharField(max_length=12, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["channel", "source"], name="alert_once_per_event_and_channel")]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="alert_due")]

    def __str__(self) -> str:
        return f"{self.kind} {self.source} -> {self.channel_id}: {self.state}"


class AlertCursor(models.Model):
    """How far the collector has read one source (the last id seen, or a component's last status)."""

    name = models.CharField(max_length=200, primary_key=True)
    position = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.name} at {self.position}"
