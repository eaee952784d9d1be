"""One OAuth token as a runtime process sees it: followed from the database, expired on time.

The database row is the truth (the web process stores codes there). This manager polls
it, so tokens renewed by another process show up here within one poll, runs the expiry
timer that retires a VALID token at the broker's daily expiry without waiting for a 401,
and hands the token to callers through `await_valid_token()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from channels.db import database_sync_to_async

from recovery.clock import Clock, sleep_until
from recovery.selectors import token_access, token_status
from recovery.services import token_await_auth, token_invalidate
from recovery.state import StateCell
from recovery.tokens import NOT_LOADED, AccessToken, TokenKey, TokenState, TokenStatus, TokenUnavailable

log = logging.getLogger(__name__)


class OAuthTokenManager:
    def __init__(
        self,
        key: TokenKey,
        *,
        clock: Clock,
        poll_interval_s: float,
        poll_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.key = key
        self._clock = clock
        self._poll_interval_s = poll_interval_s
        self._poll_sleep = poll_sleep
        self._cell: StateCell[TokenStatus] = StateCell(TokenStatus(key, TokenState.AWAITING_AUTH, NOT_LOADED))
        self._expires_at: datetime | None = None
        self._expiry_timer: asyncio.Task[None] | None = None
        self._timer_fingerprint = ""
        self._access: AccessToken | None = None

    @property
    def status(self) -> TokenStatus:
        return self._cell.value

    @property
    def state(self) -> StateCell[TokenStatus]:
        return self._cell

    async def refresh(self) -> TokenStatus:
        """Read the row once; publish a change and (re)arm the expiry timer."""
        status, expires_at = await database_sync_to_async(token_status)(key=self.key)
        if status != self._cell.value:
            if status.fingerprint != (self._access.fingerprint if self._access else ""):
                self._access = None
            self._expires_at = expires_at
            self._cell.set(status)
        self._arm_expiry_timer()
        return status

    async def run(self) -> None:
        """Follow the row until cancelled; a failed read is logged and retried next poll."""
        try:
            while True:
                try:
                    await self.refresh()
                except Exception:
                    log.warning("recovery %s: reading token state failed", self.key, exc_info=True)
                await self._poll_sleep(self._poll_interval_s)
        finally:
            self._cancel_expiry_timer()

    async def await_valid_token(self) -> AccessToken:
        status = await self._cell.wait_for(lambda s: s.state is not TokenState.AWAITING_AUTH)
        if status.state is TokenState.FAILED:
            raise TokenUnavailable(self.key, status.reason)
        if self._access is None or self._access.fingerprint != status.fingerprint:
            access = await database_sync_to_async(token_access)(key=self.key, fingerprint=status.fingerprint)
            if access is None:  # renewed or retired between the poll and now
                await self.refresh()
                return await self.await_valid_token()
            self._access = access
        return self._access

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        await database_sync_to_async(token_invalidate)(key=self.key, fingerprint=fingerprint, reason=reason)
        await self.refresh()

    def _arm_expiry_timer(self) -> None:
        status = self._cell.value
        wanted = status.fingerprint if status.state is TokenState.VALID and self._expires_at else ""
        if wanted == self._timer_fingerprint and (self._expiry_timer is None or not self._expiry_timer.done()):
            return
        self._cancel_expiry_timer()
        if wanted and self._expires_at is not None:
            self._timer_fingerprint = wanted
            self._expiry_timer = asyncio.create_task(
                self._expire_at(wanted, self._expires_at), name=f"token-expiry:{self.key}"
            )

    def _cancel_expiry_timer(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._expiry_timer, self._timer_fingerprint = None, ""

    async def _expire_at(self, fingerprint: str, expires_at: datetime) -> None:
        await sleep_until(self._clock, expires_at)
        # Identity check in the update itself: a token renewed meanwhile is left alone.
        moved = await database_sync_to_async(token_await_auth)(
            key=self.key, reason=f"token expired at {expires_at.isoformat()}", expected_fingerprint=fingerprint
        )
        if moved:
            log.info("recovery %s: token %s expired; login prompt published", self.key, fingerprint)
        with contextlib.suppress(Exception):
            self._expiry_timer = None
            self._timer_fingerprint = ""
            await self.refresh()
