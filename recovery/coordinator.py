"""AuthState: the process's token managers, and the coordinator that acts on their changes.

The OAuth and the provisioned-token coordinators as one watcher per
token: AWAITING_AUTH publishes the login prompt (coalesced), FAILED the terminal error,
VALID clears stale prompts and, on a transition back to VALID, resumes every datasource
registered for that token (`resume_if_stopped`, a no-op for a running one). The state
stream is conflated, so a FAILED followed quickly by VALID may never be seen: a VALID
that skipped states counts as a transition too, or a datasource stopped on the unseen
FAILED would never be resumed. Token health is reported as DEGRADED (never BLOCKED) so a
missing login does not take the process out of readiness.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from recovery.datasource import ResumableDataSource, TokenSource
from recovery.oauth_manager import OAuthTokenManager
from recovery.prompts import prompt_clear_logical, prompt_publish_recoverable, prompt_publish_terminal
from recovery.provisioned import ProvisionedTokenManager
from recovery.services import login_prompt_message
from recovery.tokens import NOT_LOADED, TokenKey, TokenState, TokenStatus

log = logging.getLogger(__name__)


@dataclass
class AuthState:
    """Every token this process uses, and who waits on it. Built at start, then read-only
    apart from `register_datasource`, which feeds and orders call during startup."""

    oauth: dict[TokenKey, OAuthTokenManager] = field(default_factory=dict)
    provisioned: dict[TokenKey, ProvisionedTokenManager] = field(default_factory=dict)
    datasources: dict[TokenKey, list[ResumableDataSource]] = field(default_factory=dict)

    def token_source(self, key: TokenKey) -> TokenSource:
        """The token a datasource should use; KeyError names what is not configured."""
        source = self.oauth.get(key) or self.provisioned.get(key)
        if source is None:
            raise KeyError(f"token {key} is not configured (see docs/recovery.md)")
        return source

    def register_datasource(self, key: TokenKey, datasource: ResumableDataSource) -> None:
        self.datasources.setdefault(key, []).append(datasource)

    def managers(self) -> list[OAuthTokenManager | ProvisionedTokenManager]:
        return [*self.oauth.values(), *self.provisioned.values()]


class AuthStateCoordinator:
    def __init__(self, auth_state: AuthState, health: HealthBoard) -> None:
        self.auth_state = auth_state
        self.health = health
        self.resumed = 0  # datasource resumes issued, for tests and metrics

    async def run(self) -> None:
        """Watch every token until cancelled."""
        watchers = [
            asyncio.create_task(self.watch(manager.key, manager), name=f"auth-state:{manager.key}")
            for manager in self.auth_state.managers()
        ]
        if not watchers:
            await asyncio.Event().wait()  # nothing to watch: idle for the process's life
        try:
            await asyncio.gather(*watchers)
        finally:
            for watcher in watchers:
                watcher.cancel()

    async def watch(self, key: TokenKey, manager: OAuthTokenManager | ProvisionedTokenManager) -> None:
        previous: TokenState | None = None
        last_version: int | None = None
        async for status in manager.state.updates():
            version = manager.state.version
            skipped = last_version is not None and version > last_version + 1
            last_version = version
            if status.reason == NOT_LOADED:
                continue
            try:
                await self._on_status(key, status, previous, skipped=skipped)
            except Exception:  # one failed prompt write must not stop watching the token
                log.warning("recovery %s: acting on %s failed", key, status.state, exc_info=True)
            previous = status.state

    async def _on_status(
        self, key: TokenKey, status: TokenStatus, previous: TokenState | None, *, skipped: bool = False
    ) -> None:
        component = f"token:{key}"
        if status.state is TokenState.VALID:
            self.health.set(component, Status.HEALTHY, f"token {status.fingerprint} valid")
            if not key.kind.provisioned:
                await database_sync_to_async(prompt_clear_logical)(key=key)
            if skipped or (previous is not None and previous is not TokenState.VALID):
                await self._resume(key)
        elif status.state is TokenState.AWAITING_AUTH:
            self.health.set(component, Status.DEGRADED, f"waiting for login: {status.reason}")
            if not key.kind.provisioned:
                await database_sync_to_async(prompt_publish_recoverable)(
                    key=key, message=login_prompt_message(key, status.reason)
                )
        else:
            self.health.set(component, Status.DEGRADED, f"failed: {status.reason}")
            if not key.kind.provisioned:
                await database_sync_to_async(prompt_publish_terminal)(key=key, message=status.reason)

    async def _resume(self, key: TokenKey) -> None:
        for datasource in self.auth_state.datasources.get(key, []):
            log.info("recovery %s: token valid, resuming %s if stopped", key, datasource.name)
            try:
                await datasource.resume_if_stopped()
                self.resumed += 1
            except Exception:
                log.warning("recovery %s: resuming %s failed", key, datasource.name, exc_info=True)
