"""Rate-limit windows every process shares through Redis, or this process alone keeps without it.

The `limits` library keeps the windows: in Redis when a URL is given, so every process
of the deployment draws from one budget (a venue's per-IP limit, a user's attempts),
else in its memory storage, which limits this process only. limits reaches Redis
through the installed redis-py (implementation="redispy"); its default async client,
coredis, is not installed. The moving window is one Lua script per hit, so two
processes hitting at once cannot both take the last slot.

redis-py's asyncio connections belong to the event loop that opened them, so each loop
gets its own Redis storage. The in-process windows are limits' thread-safe synchronous
memory storage, one for the process: a hit is a dictionary update that never waits, and
Django runs each async view of a sync caller in a loop of its own.
"""

from __future__ import annotations

import asyncio
import time
import weakref

from limits import RateLimitItem, RateLimitItemPerSecond, storage, strategies
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

__all__ = ["SharedWindows", "StorageError", "window"]

KEY_PREFIX = "tradingsite:limits"


def window(amount: float, period_s: float) -> RateLimitItem:
    """At most `amount` (whole units, at least 1) per `period_s` (whole seconds, at least 1)."""
    return RateLimitItemPerSecond(max(1, int(amount)), max(1, int(-(-period_s // 1))))


def limits_uri(redis_url: str) -> str:
    """limits' name for the async storage at a redis:// or rediss:// URL."""
    if not redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"not a Redis URL: {redis_url!r}")
    if redis_url.startswith("unix://"):
        return "async+redis+unix://" + redis_url.removeprefix("unix://")
    return "async+" + redis_url


class SharedWindows:
    """Moving windows in Redis (`redis_url`) or in this process (None)."""

    def __init__(self, redis_url: str | None, *, key_prefix: str = KEY_PREFIX, timeout_s: float = 2.0) -> None:
        self.redis_url = redis_url or None
        self.key_prefix = key_prefix
        self.timeout_s = timeout_s
        if self.redis_url:
            limits_uri(self.redis_url)  # a malformed URL fails here, not at the first hit
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, MovingWindowRateLimiter] = (
            weakref.WeakKeyDictionary()
        )
        self._local = strategies.MovingWindowRateLimiter(storage.MemoryStorage())

    @property
    def shared(self) -> bool:
        return self.redis_url is not None

    def _redis(self, redis_url: str) -> MovingWindowRateLimiter:
        loop = asyncio.get_running_loop()
        limiter = self._per_loop.get(loop)
        if limiter is None:
            redis_storage = RedisStorage(
                limits_uri(redis_url),
                implementation="redispy",
                key_prefix=self.key_prefix,
                wrap_exceptions=True,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
            )
            limiter = self._per_loop[loop] = MovingWindowRateLimiter(redis_storage)
        return limiter

    async def hit(self, item: RateLimitItem, *names: str, cost: int = 1) -> bool:
        """Take `cost` from the window named `names`; False (nothing taken) when it does not fit."""
        cost = min(max(1, cost), item.amount)
        if self.redis_url is None:
            return self._local.hit(item, *names, cost=cost)
        return await self._redis(self.redis_url).hit(item, *names, cost=cost)

    async def seconds_to_free(self, item: RateLimitItem, *names: str) -> float:
        """How long until the window's oldest entry leaves it, making room for a hit that did not fit."""
        if self.redis_url is None:
            stats = self._local.get_window_stats(item, *names)
        else:
            stats = await self._redis(self.redis_url).get_window_stats(item, *names)
        return max(0.0, stats.reset_time - time.time())
