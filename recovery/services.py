"""Token state writes. Every change bumps `version` so watchers in other processes see it.

Transitions away from VALID are conditional on the token's fingerprint: a stale expiry
timer or a 401 for yesterday's token cannot knock out a token that was renewed since.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F

from recovery.encryption import encrypt_token, reencrypt_token
from recovery.models import BrokerToken, PromptResolution
from recovery.prompts import prompt_clear_logical, prompt_publish_recoverable, prompt_publish_terminal
from recovery.tokens import TokenKey, TokenKind, TokenState
from recovery.upstox import TokenGrant

log = logging.getLogger(__name__)


def token_get_or_create(*, key: TokenKey, reason: str = "no token yet") -> BrokerToken:
    token, _ = BrokerToken.objects.get_or_create(
        broker=key.broker, kind=key.kind.value, defaults={"state": TokenState.AWAITING_AUTH.value, "reason": reason}
    )
    return token


def token_store_valid(
    *,
    key: TokenKey,
    grant: TokenGrant,
    config_fingerprint: str = "",
    resolution: PromptResolution = PromptResolution.VALID_OUT_OF_BAND,
) -> BrokerToken:
    """Store a newly issued OAuth token (encrypted) as VALID and clear the key's prompts."""
    ciphertext = encrypt_token(grant.access_token.reveal())
    with transaction.atomic():
        token_get_or_create(key=key)
        BrokerToken.objects.filter(broker=key.broker, kind=key.kind.value).update(
            state=TokenState.VALID.value,
            reason="",
            error_code="",
            ciphertext=ciphertext,
            fingerprint=grant.access_token.fingerprint,
            issued_at=grant.issued_at,
            expires_at=grant.expires_at,
            config_fingerprint=config_fingerprint,
            version=F("version") + 1,
        )
        prompt_clear_logical(key=key, resolution=resolution)
    log.info("recovery %s: token %s valid until %s", key, grant.access_token.fingerprint, grant.expires_at.isoformat())
    return BrokerToken.objects.get(broker=key.broker, kind=key.kind.value)


def token_await_auth(
    *, key: TokenKey, reason: str, expected_fingerprint: str | None = None, clear_failure: bool = False
) -> bool:
    """Move `key` to AWAITING_AUTH and publish its login prompt; return whether the state changed.

    With `expected_fingerprint`, only that token is retired (identity check). A FAILED
    token stays FAILED (logging in cannot fix its configuration) unless an operator
    says it was fixed (`clear_failure`).
    """
    with transaction.atomic():
        token = token_get_or_create(key=key, reason=reason)
        rows = BrokerToken.objects.filter(pk=token.pk)
        if not clear_failure:
            rows = rows.exclude(state=TokenState.FAILED.value)
        if expected_fingerprint is not None:
            rows = rows.filter(state=TokenState.VALID.value, fingerprint=expected_fingerprint)
        changed = rows.exclude(state=TokenState.AWAITING_AUTH.value).update(
            state=TokenState.AWAITING_AUTH.value,
            reason=reason,
            error_code="",
            ciphertext="",
            fingerprint="",
            version=F("version") + 1,
        )
        state = BrokerToken.objects.values_list("state", flat=True).get(pk=token.pk)
        if state == TokenState.AWAITING_AUTH.value:
            prompt_publish_recoverable(key=key, message=login_prompt_message(key, reason))
    if changed:
        log.info("recovery %s: awaiting login (%s)", key, reason)
    return bool(changed)


def token_fail(*, key: TokenKey, reason: str, error_code: str = "", config_fingerprint: str = "") -> None:
    """Move `key` to FAILED (terminal) and show the terminal error instead of a login prompt."""
    with transaction.atomic():
        token = token_get_or_create(key=key)
        BrokerToken.objects.filter(pk=token.pk).update(
            state=TokenState.FAILED.value,
            reason=reason,
            error_code=error_code,
            ciphertext="",
            fingerprint="",
            config_fingerprint=config_fingerprint,
            version=F("version") + 1,
        )
        if not key.kind.provisioned:
            prompt_publish_terminal(key=key, message=reason)
    log.warning("recovery %s: failed terminally: %s", key, reason)


def token_reset_if_config_changed(*, key: TokenKey, config_fingerprint: str) -> bool:
    """At start: a FAILED OAuth token reached with other credentials gets a fresh login prompt."""
    token = token_get_or_create(key=key)
    if token.state != TokenState.FAILED.value or token.config_fingerprint == config_fingerprint:
        return False
    with transaction.atomic():
        changed = BrokerToken.objects.filter(pk=token.pk, state=TokenState.FAILED.value).update(
            state=TokenState.AWAITING_AUTH.value,
            reason="app credentials changed: log in again",
            error_code="",
            config_fingerprint=config_fingerprint,
            version=F("version") + 1,
        )
        if changed:
            prompt_publish_recoverable(key=key, message=login_prompt_message(key, "app credentials changed"))
    return bool(changed)


def token_expire_due(*, now: datetime) -> int:
    """Retire every VALID OAuth token whose expiry has passed; return how many moved."""
    due = BrokerToken.objects.filter(
        kind=TokenKind.OAUTH.value, state=TokenState.VALID.value, expires_at__lte=now
    ).values_list("broker", "fingerprint", "expires_at")
    moved = 0
    for broker, fingerprint, expires_at in list(due):
        reason = f"token expired at {expires_at.isoformat()}"  # type: ignore[union-attr]  # expires_at__lte excludes NULL
        moved += token_await_auth(
            key=TokenKey(broker, TokenKind.OAUTH), reason=reason, expected_fingerprint=fingerprint
        )
    return moved


def token_invalidate(*, key: TokenKey, fingerprint: str, reason: str) -> bool:
    """The broker rejected this OAuth token (UDAPI100050): ask for a new login, unless it was renewed already."""
    return token_await_auth(key=key, reason=reason, expected_fingerprint=fingerprint)


def token_record_provisioned(
    *, key: TokenKey, state: TokenState, reason: str, fingerprint: str, expires_at: datetime | None
) -> None:
    """Write through a provisioned token's state (its file is the source; no ciphertext kept)."""
    token = token_get_or_create(key=key)
    if (token.state, token.reason, token.fingerprint, token.expires_at) == (
        state.value,
        reason,
        fingerprint,
        expires_at,
    ):
        return
    BrokerToken.objects.filter(pk=token.pk).update(
        state=state.value,
        reason=reason,
        fingerprint=fingerprint,
        expires_at=expires_at,
        version=F("version") + 1,
    )


def token_reencrypt_all() -> int:
    """Re-encrypt every stored token under the newest TOKEN_ENCRYPTION_KEY; return how many."""
    count = 0
    with transaction.atomic():
        for token in BrokerToken.objects.select_for_update().exclude(ciphertext=""):
            BrokerToken.objects.filter(pk=token.pk).update(ciphertext=reencrypt_token(token.ciphertext))
            count += 1
    return count


def login_prompt_message(key: TokenKey, reason: str) -> str:
    return f"{key.broker.capitalize()} login needed ({reason}). Log in at the broker, then come back or paste the code."
