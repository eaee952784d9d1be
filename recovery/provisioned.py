"""Provisioned tokens: JSON files an operator mounts (Upstox analytics, sandbox).

File `<dir>/<broker>-<kind>.json`: {"access_token": "...", "expires_at": "2027-01-01T00:00:00Z"}
(`expires_at` optional: analytics tokens are long-lived). Lifecycle: load at start; missing,
expired or unparseable -> FAILED; a 401 re-reads the file and stays FAILED while the
fingerprint is the one that was rejected. The file is polled for the manager's whole life,
VALID or not, so a rotation is picked up on the next poll without a restart: a new
token replaces the one in use (VALID again, new fingerprint), and a FAILED token recovers.
While VALID, a file that is briefly missing or half-written (a rotation in progress) keeps
the token in use. One asyncio.Lock owns every transition; the expiry timer re-checks token
identity under that lock.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from recovery.clock import Clock, sleep_until
from recovery.redaction import register_secret
from recovery.state import StateCell
from recovery.tokens import NOT_LOADED, AccessToken, TokenKey, TokenState, TokenStatus, TokenUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)  # identity matters: the expiry timer compares by `is`
class ProvisionedToken:
    access_token: AccessToken
    expires_at: datetime | None


class ProvisionedTokenInvalid(ValueError):
    """The file's content is not a usable token (reason in the message, never the token)."""


def parse_provisioned_token(raw: bytes, *, now: datetime) -> ProvisionedToken:
    """Parse a provisioned token file; raise ProvisionedTokenInvalid if unusable or expired."""
    try:
        payload: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ProvisionedTokenInvalid("token file is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ProvisionedTokenInvalid("token file must hold a JSON object")
    secret = payload.get("access_token")
    if not isinstance(secret, str) or not secret.strip():
        raise ProvisionedTokenInvalid("token file has no access_token")
    expires_at = None
    raw_expiry = payload.get("expires_at")
    if raw_expiry is not None:
        try:
            expires_at = datetime.fromisoformat(str(raw_expiry).replace("Z", "+00:00"))
        except ValueError:
            raise ProvisionedTokenInvalid("token file has an unreadable expires_at") from None
        if expires_at.tzinfo is None:
            raise ProvisionedTokenInvalid("token file expires_at needs a timezone (e.g. Z)")
        if expires_at <= now:
            raise ProvisionedTokenInvalid(f"token in file expired at {expires_at.isoformat()}")
    return ProvisionedToken(AccessToken(secret.strip()), expires_at)


def provisioned_token_path(directory: Path, key: TokenKey) -> Path:
    return directory / f"{key.broker}-{key.kind.value}.json"


StateSink = Callable[[TokenStatus, datetime | None], Awaitable[None]]


async def _no_sink(status: TokenStatus, expires_at: datetime | None) -> None:
    return None


class ProvisionedTokenManager:
    def __init__(
        self,
        key: TokenKey,
        path: Path,
        *,
        clock: Clock,
        poll_interval_s: float,
        poll_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_state: StateSink = _no_sink,
    ) -> None:
        self.key = key
        self.path = path
        self._clock = clock
        self._poll_interval_s = poll_interval_s
        self._poll_sleep = poll_sleep
        self._on_state = on_state
        self._lock = asyncio.Lock()
        self._cell: StateCell[TokenStatus] = StateCell(TokenStatus(key, TokenState.AWAITING_AUTH, NOT_LOADED))
        self._token: ProvisionedToken | None = None
        # Fingerprint of the last file content acted on; None after a read error, so the
        # same bytes reappearing count as new.
        self.last_fingerprint: str | None = None
        self._poller: asyncio.Task[None] | None = None
        self._expiry_timer: asyncio.Task[None] | None = None

    @property
    def status(self) -> TokenStatus:
        return self._cell.value

    @property
    def state(self) -> StateCell[TokenStatus]:
        return self._cell

    @property
    def poller_running(self) -> bool:
        return self._poller is not None and not self._poller.done()

    async def start(self) -> None:
        async with self._lock:
            await self._load_under_lock(rejected_fingerprint=None)
            self._ensure_poller()

    def _ensure_poller(self) -> None:
        if not self.poller_running:
            self._poller = asyncio.create_task(self._poll(), name=f"token-poll:{self.key}")

    async def stop(self) -> None:
        for task in (self._poller, self._expiry_timer):
            if task is not None:
                task.cancel()
        self._poller = self._expiry_timer = None

    async def await_valid_token(self) -> AccessToken:
        status = await self._cell.wait_for(lambda s: s.state is not TokenState.AWAITING_AUTH)
        token = self._token
        if status.state is TokenState.FAILED or token is None:
            raise TokenUnavailable(self.key, status.reason)
        return token.access_token

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        """The broker rejected the token with `fingerprint`: re-read; FAILED unless the file changed."""
        async with self._lock:
            if self._token is not None and self._token.access_token.fingerprint != fingerprint:
                return  # a newer token is already in use; the 401 was for an old one
            await self._load_under_lock(rejected_fingerprint=fingerprint, rejected_reason=reason)

    async def _read(self) -> ProvisionedToken | str:
        """Return the file's token, or why there is none. Clears last_fingerprint on I/O errors."""
        try:
            raw = await asyncio.to_thread(self.path.read_bytes)
        except FileNotFoundError:
            return f"token file {self.path} is missing"
        except OSError as exc:
            self.last_fingerprint = None
            return f"token file {self.path} is unreadable ({exc.__class__.__name__})"
        try:
            token = parse_provisioned_token(raw, now=self._clock.now())
        except ProvisionedTokenInvalid as exc:
            return f"{exc} ({self.path})"
        register_secret(token.access_token.reveal())
        return token

    async def _load_under_lock(self, *, rejected_fingerprint: str | None, rejected_reason: str = "") -> None:
        found = await self._read()
        if isinstance(found, str):
            await self._become_failed_under_lock(found)
            return
        fingerprint = found.access_token.fingerprint
        if rejected_fingerprint is not None and fingerprint == rejected_fingerprint:
            self.last_fingerprint = fingerprint
            await self._become_failed_under_lock(
                f"the broker rejected the token in {self.path.name} ({rejected_reason}); rotate the file"
            )
            return
        await self._become_valid_under_lock(found)

    async def _become_valid_under_lock(self, token: ProvisionedToken) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        self._token = token
        self.last_fingerprint = token.access_token.fingerprint
        status = TokenStatus(self.key, TokenState.VALID, "", token.access_token.fingerprint, self._cell.version + 1)
        self._cell.set(status)
        await self._publish(status, token.expires_at)
        if token.expires_at is not None:
            self._expiry_timer = asyncio.create_task(self._expire(token), name=f"token-expiry:{self.key}")
        log.info("recovery %s: provisioned token %s loaded", self.key, token.access_token.fingerprint)

    async def _become_failed_under_lock(self, reason: str) -> None:
        if self._expiry_timer is not None and self._expiry_timer is not asyncio.current_task():
            self._expiry_timer.cancel()
        self._expiry_timer = None
        self._token = None
        if self._cell.value.state is not TokenState.FAILED or self._cell.value.reason != reason:
            status = TokenStatus(self.key, TokenState.FAILED, reason, "", self._cell.version + 1)
            self._cell.set(status)
            await self._publish(status, None)
            log.warning("recovery %s: provisioned token unavailable: %s", self.key, reason)
        self._ensure_poller()

    async def _publish(self, status: TokenStatus, expires_at: datetime | None) -> None:
        try:
            await self._on_state(status, expires_at)
        except Exception:  # the in-process state is what this process uses; the row is a report
            log.warning("recovery %s: recording token state failed", self.key, exc_info=True)

    async def _poll(self) -> None:
        me = asyncio.current_task()
        kept_reason = ""  # why the file is unusable while the token in use is kept (logged once)
        while self._poller is me:
            await self._poll_sleep(self._poll_interval_s)
            async with self._lock:
                if self._poller is not me:
                    return
                found = await self._read()
                if isinstance(found, str):
                    if self._token is None:
                        await self._become_failed_under_lock(found)
                    elif found != kept_reason:
                        kept_reason = found
                        log.warning("recovery %s: %s; keeping the token in use", self.key, found)
                elif found.access_token.fingerprint != self.last_fingerprint:
                    kept_reason = ""
                    rotated = self._token is not None and self._token.access_token.fingerprint != (
                        found.access_token.fingerprint
                    )
                    await self._become_valid_under_lock(found)
                    if rotated:
                        log.info("recovery %s: token file rotated; new token in use", self.key)
                else:
                    kept_reason = ""

    async def _expire(self, token: ProvisionedToken) -> None:
        assert token.expires_at is not None
        await sleep_until(self._clock, token.expires_at)
        async with self._lock:
            if self._token is not token:
                return  # a stale timer from a token replaced meanwhile
            await self._become_failed_under_lock(f"provisioned token expired at {token.expires_at.isoformat()}")
