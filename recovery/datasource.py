"""What recovery asks of a datasource (a feed, a broker client), and its token health helper.

Feeds and orders implement ResumableDataSource and register it with the AuthState that
recovery provides at startup (`auth_state.register_datasource(key, datasource)`); the
coordinator calls `resume_if_stopped()` when that token becomes VALID again.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.health import HealthBoard, Status
from recovery.tokens import AccessToken, TokenKey, TokenStatus, TokenUnavailable


@runtime_checkable
class ResumableDataSource(Protocol):
    name: str

    async def resume_if_stopped(self) -> None:
        """Start again if stopped on a token problem; do nothing if running. Must not raise."""


class TokenSource(Protocol):
    """A token as a datasource uses it: wait for it, report it rejected, read its state."""

    key: TokenKey

    @property
    def status(self) -> TokenStatus: ...

    async def await_valid_token(self) -> AccessToken:
        """Return the valid token, waiting while a login is pending; raise TokenUnavailable when FAILED."""

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        """Report that the broker rejected the token with this fingerprint (HTTP 401 / UDAPI100050)."""


class TerminalFailureHealth:
    """A datasource's health while its token is terminally unavailable.

    `token_unavailable()` reports DEGRADED with the message (readiness stays green: the
    feed is degraded, not dead); `upstream_ready()` clears it as soon as the upstream
    connects again, so a quiet market after recovery still reads HEALTHY.
    """

    def __init__(self, board: HealthBoard, component: str) -> None:
        self._board = board
        self.component = component
        self.terminal_failure_message: str | None = None

    def token_unavailable(self, error: TokenUnavailable) -> None:
        self.terminal_failure_message = f"token unavailable: {error.reason}"
        self._board.set(self.component, Status.DEGRADED, self.terminal_failure_message)

    def upstream_ready(self, reason: str = "upstream connected") -> None:
        if self.terminal_failure_message is not None:
            self.terminal_failure_message = None
            self._board.set(self.component, Status.HEALTHY, reason)
