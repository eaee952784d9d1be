"""Token and prompt reads."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from recovery.encryption import decrypt_token
from recovery.models import AuthPrompt, BrokerToken
from recovery.redaction import register_secret
from recovery.tokens import AccessToken, TokenKey, TokenState, TokenStatus


def token_status(*, key: TokenKey) -> tuple[TokenStatus, datetime | None]:
    """Return the key's status and its expiry (None when the row does not exist yet)."""
    row = (
        BrokerToken.objects.filter(broker=key.broker, kind=key.kind.value)
        .values("state", "reason", "fingerprint", "version", "expires_at")
        .first()
    )
    if row is None:
        return TokenStatus(key, TokenState.AWAITING_AUTH, "no token yet"), None
    return (
        TokenStatus(key, TokenState(row["state"]), row["reason"], row["fingerprint"], row["version"]),
        row["expires_at"],
    )


def token_access(*, key: TokenKey, fingerprint: str) -> AccessToken | None:
    """Decrypt the stored OAuth token if it is still the VALID one with `fingerprint`."""
    ciphertext = (
        BrokerToken.objects.filter(
            broker=key.broker, kind=key.kind.value, state=TokenState.VALID.value, fingerprint=fingerprint
        )
        .values_list("ciphertext", flat=True)
        .first()
    )
    if not ciphertext:
        return None
    secret = decrypt_token(ciphertext)
    register_secret(secret)
    return AccessToken(secret)


def prompts_open_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[AuthPrompt]:
    """Open prompts this user may see and answer: their own, and unowned ones for superusers.

    Not staff in general: a prompt's recovery token is the OAuth state that completes the
    login, so whoever sees it could log the slot in to their own broker account.
    """
    if not user.is_authenticated:
        return AuthPrompt.objects.none()
    visible = Q(owner_id=user.pk)
    if getattr(user, "is_superuser", False):
        visible |= Q(owner__isnull=True)
    return AuthPrompt.objects.filter(visible, resolved_at__isnull=True).order_by("created_at")


def prompt_for_user(*, user: AbstractBaseUser, recovery_token: str) -> AuthPrompt | None:
    """The open prompt with this recovery token, if the user may act on it."""
    try:
        uuid.UUID(recovery_token)
    except ValueError:
        return None
    return prompts_open_for_user(user).filter(recovery_token=recovery_token).first()
