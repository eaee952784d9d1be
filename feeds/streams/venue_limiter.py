"""In-process token buckets per venue, at a fraction of the venue's published limits.

The order side shares this IP and cannot be seen from here, so the feed takes only a
fraction (half by default) of each limit. A call that cannot get a token within its
wait budget does not happen (fail closed): RateLimitDenied is raised and the caller
reports it, instead of finding the limit by being banned. One set of buckets per venue
per event loop (aiolimiter binds to its loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiolimiter import AsyncLimiter

from feeds.venues import VENUES
from feeds.venues.base import DEFAULT_LIMITS, PublishedLimits


class RateLimitDenied(RuntimeError):
    """No token within the wait budget; the call was not made."""


class VenueRateLimiter:
    """Token buckets for one venue: REST weight, websocket dials, outgoing messages."""

    def __init__(self, limits: PublishedLimits, *, fraction: float = 0.5, max_wait_s: float = 5.0) -> None:
        if not 0 < fraction <= 1:
            raise ValueError("fraction must be in (0, 1]")
        self.limits = limits
        self.fraction = fraction
        self.max_wait_s = max_wait_s
        self._rest = AsyncLimiter(
            max(limits.rest_weight * fraction, limits.trades_request_weight), limits.rest_period_s
        )
        self._dials = AsyncLimiter(max(limits.dials * fraction, 1), limits.dial_period_s)
        self._messages_per_s = None if limits.messages_per_s is None else max(limits.messages_per_s * fraction, 1)
        self.denied = 0

    async def acquire_rest(self, weight: float | None = None) -> None:
        await self._acquire(self._rest, weight or self.limits.trades_request_weight, "REST")

    async def acquire_dial(self) -> None:
        await self._acquire(self._dials, 1, "websocket dial")

    def message_limiter(self) -> AsyncLimiter | None:
        """A fresh per-connection bucket for outgoing messages (None: the venue sets no limit)."""
        return None if self._messages_per_s is None else AsyncLimiter(self._messages_per_s, 1.0)

    async def acquire_message(self, limiter: AsyncLimiter | None) -> None:
        if limiter is not None:
            await self._acquire(limiter, 1, "websocket message")

    async def _acquire(self, limiter: AsyncLimiter, amount: float, what: str) -> None:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
        # cancellation that lands as the inner acquire completes, and the stream would
        # then outlive its own shutdown.
        try:
            async with asyncio.timeout(self.max_wait_s):
                await limiter.acquire(amount)
        except TimeoutError:
            self.denied += 1
            raise RateLimitDenied(
                f"{what}: no token within {self.max_wait_s}s ({self.fraction:.0%} of the published limit)"
            ) from None


class RateLimiterRegistry:
    """One VenueRateLimiter per venue, shared by every stream of the venue in this process."""

    def __init__(
        self, *, fraction: float = 0.5, max_wait_s: float = 5.0, limits: Mapping[str, PublishedLimits] | None = None
    ) -> None:
        self._fraction = fraction
        self._max_wait_s = max_wait_s
        # Each venue declares its own limits (Venue.limits); `limits` replaces them all.
        self._limits = None if limits is None else dict(limits)
        self._limiters: dict[str, VenueRateLimiter] = {}

    def for_venue(self, venue: str) -> VenueRateLimiter:
        limiter = self._limiters.get(venue)
        if limiter is None:
            limiter = self._limiters[venue] = VenueRateLimiter(
                self._limits_of(venue), fraction=self._fraction, max_wait_s=self._max_wait_s
            )
        return limiter

    def _limits_of(self, venue: str) -> PublishedLimits:
        if self._limits is not None:
            return self._limits.get(venue, DEFAULT_LIMITS)
        adapter = VENUES.get(venue)
        return adapter.limits if adapter is not None else DEFAULT_LIMITS
