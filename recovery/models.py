"""Broker token state and the auth prompts shown to users.

The database is the one place token state lives, so the web process (which takes the
auth code) and runtime processes (which use the token) agree, and a restart keeps it.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from recovery.tokens import TokenKey, TokenKind, TokenState


class BrokerToken(models.Model):
    """The state of one (broker, kind) token slot; the access token only as ciphertext."""

    broker = models.CharField(max_length=40)
    kind = models.CharField(max_length=20, choices=[(k.value, k.value) for k in TokenKind])
    state = models.CharField(
        max_length=20, choices=[(s.value, s.value) for s in TokenState], default=TokenState.AWAITING_AUTH.value
    )
    reason = models.TextField(blank=True)
    error_code = models.CharField(max_length=40, blank=True, help_text="The broker's code for the last failure.")
    # Fernet ciphertext (MultiFernet over TOKEN_ENCRYPTION_KEY). Empty for provisioned
    # tokens: their mounted file is the source, the row only records state.
    ciphertext = models.TextField(blank=True, editable=False)
    fingerprint = models.CharField(max_length=16, blank=True, help_text="sha256 prefix of the token; safe to show.")
    issued_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    config_fingerprint = models.CharField(
        max_length=16, blank=True, help_text="Identity of the app credentials this state was reached with."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="broker_tokens",
        help_text="Who logs in at the broker and sees the prompts; superusers only when empty.",
    )
    # Bumped on every change so that watchers in other processes notice any transition.
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["broker", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["broker", "kind"], name="brokertoken_unique_broker_kind"),
            models.CheckConstraint(
                condition=~models.Q(state=TokenState.VALID.value) | ~models.Q(fingerprint=""),
                name="brokertoken_valid_has_fingerprint",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker}/{self.kind}: {self.state}"

    @property
    def key(self) -> TokenKey:
        return TokenKey(self.broker, TokenKind(self.kind))


class PromptResolution(models.TextChoices):
    RECOVERED = "recovered", "Recovered by the user"
    VALID_OUT_OF_BAND = "valid_out_of_band", "Token became valid elsewhere"
    SUPERSEDED = "superseded", "Replaced by another prompt"


class AuthPrompt(models.Model):
    """One recoverable (or terminal) token error shown on the owner's dashboards.

    Open prompts are coalesced by `recovery_key` (the broker's login URL without state):
    any number of AWAITING_AUTH reports for one broker share one prompt and one
    `recovery_token`, which is also the OAuth `state` checked by the redirect endpoint.
    """

    recovery_token = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recovery_key = models.CharField(max_length=1000)
    broker = models.CharField(max_length=40)
    kind = models.CharField(max_length=20, choices=[(k.value, k.value) for k in TokenKind])
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="auth_prompts"
    )
    terminal = models.BooleanField(default=False, help_text="No login can fix it: the configuration must change.")
    message = models.TextField()
    login_url = models.TextField(blank=True, help_text="The broker's login link, with state = recovery_token.")
    last_error = models.TextField(blank=True, help_text="Why the last submitted code did not work.")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=20, choices=PromptResolution.choices, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["recovery_key"],
                condition=models.Q(resolved_at__isnull=True),
                name="authprompt_one_open_per_recovery_key",
            ),
        ]
        indexes = [models.Index(fields=["broker", "kind", "resolved_at"], name="authprompt_open_by_token")]

    def __str__(self) -> str:
        return f"{self.broker}/{self.kind} prompt ({'open' if self.resolved_at is None else self.resolution})"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None
