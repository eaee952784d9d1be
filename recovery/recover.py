"""Submitting an authorization code: the one way a user turns a prompt into a VALID token.

Both the OAuth redirect endpoint and the paste-the-code form end here. A refused code
(bad, reused, blackout, broker down) leaves the token state as it was and shows the
reason on the prompt; wrong app credentials turn the token FAILED (terminal).
"""

from __future__ import annotations

import logging
from datetime import datetime

from channels.db import database_sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from recovery.brokers import get_exchange
from recovery.models import AuthPrompt, BrokerToken, PromptResolution
from recovery.prompts import prompt_record_error, prompt_resolve
from recovery.selectors import prompt_for_user
from recovery.services import token_fail, token_store_valid
from recovery.tokens import (
    AuthCodeRejected,
    NonRecoverableTokenError,
    TokenBlackout,
    TokenError,
    TokenExchangeUnavailable,
    TokenKey,
    TokenKind,
    TokenState,
)
from recovery.upstox import TokenGrant

log = logging.getLogger(__name__)


class PromptNotOpen(TokenError):
    """No open prompt with this recovery token for this user (resolved, foreign or made up)."""


def _token_recovered(*, key: TokenKey, grant: TokenGrant, config_fingerprint: str, prompt: AuthPrompt | None) -> None:
    with transaction.atomic():
        if prompt is not None:
            prompt_resolve(prompt=prompt, resolution=PromptResolution.RECOVERED)
        token_store_valid(key=key, grant=grant, config_fingerprint=config_fingerprint)


def _failed_with_same_config(key: TokenKey, config_fingerprint: str) -> str | None:
    row = (
        BrokerToken.objects.filter(broker=key.broker, kind=key.kind.value)
        .values("state", "reason", "config_fingerprint")
        .first()
    )
    if row and row["state"] == TokenState.FAILED.value and row["config_fingerprint"] == config_fingerprint:
        return str(row["reason"])
    return None


async def oauth_submit_code(*, key: TokenKey, code: str, now: datetime, prompt: AuthPrompt | None = None) -> None:
    """Exchange `code` for `key`'s token and store it VALID; raise a TokenError saying why not."""
    if key.kind is not TokenKind.OAUTH:
        raise TokenError(f"{key} is provisioned by an operator; it has no login")
    code = code.strip()
    if not code or len(code) > 512:
        raise AuthCodeRejected("Paste the code from the address bar after logging in (the value after code=).")
    exchange = get_exchange(key.broker)
    failed_reason = await database_sync_to_async(_failed_with_same_config)(key, exchange.config_fingerprint)
    if failed_reason is not None:
        raise NonRecoverableTokenError(failed_reason)
    try:
        grant = await exchange.exchange(code, now=now)
    except NonRecoverableTokenError as exc:
        await database_sync_to_async(token_fail)(
            key=key, reason=str(exc), error_code=exc.error_code, config_fingerprint=exchange.config_fingerprint
        )
        raise
    except (AuthCodeRejected, TokenBlackout, TokenExchangeUnavailable) as exc:
        log.info("recovery %s: code refused: %s", key, exc)
        if prompt is not None:
            await database_sync_to_async(prompt_record_error)(prompt=prompt, error=str(exc))
        raise
    await database_sync_to_async(_token_recovered)(
        key=key, grant=grant, config_fingerprint=exchange.config_fingerprint, prompt=prompt
    )


async def prompt_recover(*, user: AbstractBaseUser, recovery_token: str, code: str, now: datetime) -> AuthPrompt:
    """Resolve exactly the prompt named by `recovery_token` with `code`; other prompts stay open."""
    prompt = await database_sync_to_async(prompt_for_user)(user=user, recovery_token=recovery_token)
    if prompt is None:
        raise PromptNotOpen(
            "This login prompt is no longer open: the token may already be valid. Reload the dashboard."
        )
    if prompt.terminal:
        raise NonRecoverableTokenError(prompt.message)
    await oauth_submit_code(key=TokenKey(prompt.broker, TokenKind(prompt.kind)), code=code, now=now, prompt=prompt)
    return prompt
