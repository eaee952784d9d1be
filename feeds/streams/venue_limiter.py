"""Rate limits per venue, at a fraction of the venue's published limits, shared by every process.

A venue counts per IP, so with Redis configured the REST weight and websocket dials of
a venue are one moving window in Redis (core.shared_limits) that every process of the
deployment draws from: two runfeed processes on one host take the limit once, not twice.
Without Redis (the embedded site) they are token buckets in this process. Outgoing
messages are counted per connection and stay local.

The order side shares this IP and cannot be seen from here, so the feed takes only a
fraction (half by default) of each limit. A call that cannot get its share within its
wait budget does not happen (fail closed): RateLimitDenied is raised and the caller
reports it, instead of finding the limit by being banned. When Redis does not answer,
the call falls back to this process's bucket rather than stopping the feed. One set of
buckets per venue per event loop (aiolimiter binds to its loop).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping

from aiolimiter import AsyncLimiter
from django.conf import settings
from limits import RateLimitItem

from core.shared_limits import SharedWindows, StorageError, window
from feeds.venues import VENUES
from feeds.venues.base import DEFAULT_LIMITS, PublishedLimits

log = logging.getLogger(__name__)

# A Redis outage is reported once per this interval, not on every call, and Redis is
# asked again only after SHARED_RETRY_S (each try may wait for a connect timeout).
FALLBACK_LOG_EVERY_S = 60.0
SHARED_RETRY_S = 15.0
# RateLimiterRegistry's default: share through the deployment's Redis (settings.REDIS_URL).
FROM_SETTINGS = "from-settings"


class RateLimitDenied(RuntimeError):
    """No token within the wait budget; the call was not made."""


class VenueRateLimiter:
    """Token buckets for one venue: REST weight, websocket dials, outgoing messages."""

    def __init__(
        self,
        limits: PublishedLimits,
        *,
        fraction: float = 0.5,
        max_wait_s: float = 5.0,
        shared: SharedWindows | None = None,
        venue: str = "",
    ) -> None:
        if not 0 < fraction <= 1:
            raise ValueError("fraction must be in (0, 1]")
        if shared is not None and not venue:
            raise ValueError("a shared limiter needs the venue's name: it names the window in Redis")
        self.limits = limits
        self.fraction = fraction
        self.max_wait_s = max_wait_s
        self.venue = venue
        self.shared = shared if shared is not None and shared.shared else None
        rest_capacity = max(limits.rest_weight * fraction, limits.trades_request_weight)
        dial_capacity = max(limits.dials * fraction, 1)
        self._rest = AsyncLimiter(rest_capacity, limits.rest_period_s)
        self._dials = AsyncLimiter(dial_capacity, limits.dial_period_s)
        self._rest_window = window(rest_capacity, limits.rest_period_s)
        self._dial_window = window(dial_capacity, limits.dial_period_s)
        self._messages_per_s = None if limits.messages_per_s is None else max(limits.messages_per_s * fraction, 1)
        self.denied = 0
        self.fallbacks = 0
        self._fallback_logged_at = -math.inf
        self._shared_down_until = -math.inf

    async def acquire_rest(self, weight: float | None = None) -> None:
        amount = weight or self.limits.trades_request_weight
        if self.shared is not None:
            await self._acquire_shared(self._rest_window, "rest", amount, self._rest, "REST")
        else:
            await self._acquire(self._rest, amount, "REST")

    async def acquire_dial(self) -> None:
        if self.shared is not None:
            await self._acquire_shared(self._dial_window, "dials", 1, self._dials, "websocket dial")
        else:
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

    async def _acquire_shared(
        self, item: RateLimitItem, bucket: str, amount: float, local: AsyncLimiter, what: str
    ) -> None:
        assert self.shared is not None
        if time.monotonic() < self._shared_down_until:
            self.fallbacks += 1
            await self._acquire(local, amount, what)
            return
        cost = max(1, math.ceil(amount))
        try:
            async with asyncio.timeout(self.max_wait_s):
                while not await self.shared.hit(item, self.venue, bucket, cost=cost):
                    # Full: sleep until the oldest entry leaves the window (the timeout bounds it).
                    await asyncio.sleep(max(0.01, await self.shared.seconds_to_free(item, self.venue, bucket)))
        except TimeoutError:
            self.denied += 1
            raise RateLimitDenied(
                f"{what}: no share within {self.max_wait_s}s ({self.fraction:.0%} of the published limit, "
                f"shared by every process of {self.venue})"
            ) from None
        except StorageError as exc:
            self.fallbacks += 1
            now = time.monotonic()
            self._shared_down_until = now + SHARED_RETRY_S
            if now - self._fallback_logged_at >= FALLBACK_LOG_EVERY_S:
                self._fallback_logged_at = now
                log.warning(
                    "%s rate limit: Redis unavailable (%r), limiting this process only (%d times so far)",
                    self.venue,
                    exc,
                    self.fallbacks,
                )
            await self._acquire(local, amount, what)


class RateLimiterRegistry:
    """One VenueRateLimiter per venue, shared by every stream of the venue in this process.

    `redis_url` (default: the deployment's REDIS_URL; None or "": this process only)
    shares each venue's windows with every other process using the same Redis database.
    """

    def __init__(
        self,
        *,
        fraction: float = 0.5,
        max_wait_s: float = 5.0,
        limits: Mapping[str, PublishedLimits] | None = None,
        redis_url: str | None = FROM_SETTINGS,
    ) -> None:
        self._fraction = fraction
        self._max_wait_s = max_wait_s
        # Each venue declares its own limits (Venue.limits); `limits` replaces them all.
        self._limits = None if limits is None else dict(limits)
        self._limiters: dict[str, VenueRateLimiter] = {}
        url = settings.REDIS_URL if redis_url == FROM_SETTINGS else redis_url
        self.shared = SharedWindows(url or None, key_prefix="tradingsite:venue-limits")

    def for_venue(self, venue: str) -> VenueRateLimiter:
        limiter = self._limiters.get(venue)
        if limiter is None:
            limiter = self._limiters[venue] = VenueRateLimiter(
                self._limits_of(venue),
                fraction=self._fraction,
                max_wait_s=self._max_wait_s,
                shared=self.shared,
                venue=venue,
            )
        return limiter

    def _limits_of(self, venue: str) -> PublishedLimits:
        if self._limits is not None:
            return self._limits.get(venue, DEFAULT_LIMITS)
        adapter = VENUES.get(venue)
        return adapter.limits if adapter is not None else DEFAULT_LIMITS
