"""Recovery's startup tasks (see core.runtime.core.Phase).

Phase 1 loads token state and provides it (the `auth_state` startup value the
composition root hands here and to the feeds and brokers), so datasources built in
DATA_FLOW can take their token sources from it and register for resume. Phase AUTH_STATE
starts following the tokens: OAuth state polls and
expiry timers, provisioned-file polls, and the coordinator.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from channels.db import database_sync_to_async
from django.conf import settings

from core.runtime.core import FatalError, Phase, RuntimeContext, StartupTask
from core.runtime.startup_value import StartupValue
from recovery.brokers import oauth_exchanges
from recovery.clock import Clock, current_clock
from recovery.coordinator import AuthState, AuthStateCoordinator
from recovery.oauth_manager import OAuthTokenManager
from recovery.provisioned import ProvisionedTokenManager, provisioned_token_path
from recovery.services import token_record_provisioned, token_reset_if_config_changed
from recovery.tokens import TokenKey, TokenKind, TokenStatus


def provisioned_keys(names: list[str]) -> list[TokenKey]:
    """Parse RECOVERY_PROVISIONED_TOKENS entries like "upstox/analytics"."""
    keys = []
    for name in names:
        broker, _, kind = name.strip().partition("/")
        try:
            token_kind = TokenKind(kind)
        except ValueError:
            token_kind = TokenKind.OAUTH
        if not broker or token_kind is TokenKind.OAUTH:
            raise FatalError(
                f"RECOVERY_PROVISIONED_TOKENS entry {name!r}: expected <broker>/analytics or <broker>/sandbox"
            )
        keys.append(TokenKey(broker, token_kind))
    return keys


def _record_provisioned(key: TokenKey):  # type: ignore[no-untyped-def]
    async def record(status: TokenStatus, expires_at: datetime | None) -> None:
        await database_sync_to_async(token_record_provisioned)(
            key=key, state=status.state, reason=status.reason, fingerprint=status.fingerprint, expires_at=expires_at
        )

    return record


def build_auth_state(*, clock: Clock) -> AuthState:
    """Construct (without starting) the managers for every configured token."""
    auth_state = AuthState()
    for exchange in oauth_exchanges():
        key = TokenKey(exchange.broker, TokenKind.OAUTH)
        auth_state.oauth[key] = OAuthTokenManager(
            key, clock=clock, poll_interval_s=settings.RECOVERY_TOKEN_STATE_POLL_S
        )
    directory = Path(settings.RECOVERY_PROVISIONED_TOKEN_DIR)
    for key in provisioned_keys(settings.RECOVERY_PROVISIONED_TOKENS):
        auth_state.provisioned[key] = ProvisionedTokenManager(
            key,
            provisioned_token_path(directory, key),
            clock=clock,
            poll_interval_s=settings.RECOVERY_PROVISIONED_POLL_S,
            on_state=_record_provisioned(key),
        )
    return auth_state


def recovery_startup_tasks(auth_state_value: StartupValue[AuthState]) -> list[StartupTask]:
    async def load_token_state(ctx: RuntimeContext) -> None:
        auth_state = build_auth_state(clock=current_clock())
        auth_state_value.provide(auth_state)
        for exchange in oauth_exchanges():
            await database_sync_to_async(token_reset_if_config_changed)(
                key=TokenKey(exchange.broker, TokenKind.OAUTH), config_fingerprint=exchange.config_fingerprint
            )
        for oauth in auth_state.oauth.values():
            await oauth.refresh()
        for provisioned in auth_state.provisioned.values():
            ctx.exit_stack.push_async_callback(provisioned.stop)
            await provisioned.start()

    async def start_auth_state(ctx: RuntimeContext) -> None:
        auth_state = auth_state_value.get()
        for oauth in auth_state.oauth.values():
            ctx.spawn(f"token:{oauth.key}", oauth.run())
        ctx.spawn("auth-state-coordinator", AuthStateCoordinator(auth_state, ctx.health).run())

    return [
        StartupTask("load-token-state", Phase.ADD_FEEDS_AND_STRATEGIES, load_token_state),
        StartupTask("start-auth-state", Phase.AUTH_STATE, start_auth_state),
    ]
