"""The Upstox market feed as a resumable datasource of recovery's analytics token.

The upstox venue asks this object for its token on every dial. While the token is
available it hands it through. When the token fails terminally (the provisioned file
is missing, expired, or was rejected by Upstox), the feed stops dialling instead of
retrying into a dead end: the one dial that learnt it fails, every later dial waits
here, and each upstox feed reports DEGRADED with the terminal message (readiness kept:
the feed is degraded, not dead). The datasource does not watch the token itself: the
auth-state coordinator calls `resume_if_stopped()` when the token is VALID again, and
the waiting dials go on. The terminal message clears as soon as Upstox accepts the
token again (the authorize call of the next dial), so a quiet market after recovery
reads HEALTHY.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from core.health import HealthBoard, Status, worst
from recovery.datasource import TerminalFailureHealth, TokenSource
from recovery.tokens import AccessToken, TokenState, TokenUnavailable

log = logging.getLogger(__name__)

NAME = "upstox-feed"
TOKEN_PART = "token"  # the feed's health part: feed:<name>/token


class UpstoxDataSource:
    name = NAME

    def __init__(self, source: TokenSource, board: HealthBoard, feed_names: Sequence[str]) -> None:
        self._source = source
        self.key = source.key
        self._board = board
        self.feed_names = list(feed_names)
        self._health = [TerminalFailureHealth(board, f"feed:{feed}/{TOKEN_PART}") for feed in self.feed_names]
        self._resumed = asyncio.Event()
        self.stopped = False
        self.waiting = 0  # dials parked until a resume
        self.terminal_failures = 0
        self.resumes = 0

    @property
    def terminal_failure_message(self) -> str | None:
        return self._health[0].terminal_failure_message if self._health else None

    # --- the token source the venue dials with -------------------------------------

    async def await_valid_token(self) -> AccessToken:
        """Return the token; wait while stopped; stop (and raise) on a terminal failure."""
        while self.stopped:
            resumed = self._resumed
            self.waiting += 1
            try:
                await resumed.wait()
            finally:
                self.waiting -= 1
        try:
            return await self._source.await_valid_token()
        except TokenUnavailable as exc:
            self._stop(exc)
            raise

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        await self._source.invalidate(fingerprint, reason)
        status = self._source.status
        if status.state is TokenState.FAILED:
            # The rejection left no usable token: stop now, not after one more dial.
            self._stop(TokenUnavailable(self.key, status.reason))

    def token_accepted(self) -> None:
        """Upstox accepted the token (an authorize call succeeded): the terminal failure is over."""
        if self.terminal_failure_message is None:
            return
        for health in self._health:
            health.upstream_ready("token accepted")
        self._refresh_feeds()
        log.info("feed upstox: token accepted again; the terminal failure is cleared")

    # --- recovery's ResumableDataSource --------------------------------------------

    async def resume_if_stopped(self) -> None:
        if not self.stopped:
            return
        self.stopped = False
        self.resumes += 1
        resumed, self._resumed = self._resumed, asyncio.Event()
        resumed.set()
        log.info("feed upstox: resumed (%d dial(s) waiting go on)", self.waiting)

    # --- internals -----------------------------------------------------------------

    def _stop(self, error: TokenUnavailable) -> None:
        self.terminal_failures += 1
        first = not self.stopped
        self.stopped = True
        for health in self._health:
            health.token_unavailable(error)
        self._refresh_feeds()
        if first:
            log.warning(
                "feed upstox: %s; not dialling again until the token is valid (%s)",
                self.terminal_failure_message,
                ", ".join(self.feed_names) or "no feeds",
            )

    def _refresh_feeds(self) -> None:
        # A stream that waits here reports nothing more, so the feed's summary is
        # recomputed from its parts the way the streams do.
        snapshot = self._board.snapshot()
        for feed in self.feed_names:
            prefix = f"feed:{feed}/"
            parts = {name[len(prefix) :]: h for name, h in sorted(snapshot.items()) if name.startswith(prefix)}
            status = worst([h.status for h in parts.values()])
            reasons = [f"{name}: {h.reason}" for name, h in parts.items() if h.status is not Status.HEALTHY]
            self._board.set(f"feed:{feed}", status, "; ".join(reasons) or "streaming")
