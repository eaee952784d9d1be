"""A fixed-window limit on auth-code submissions, kept in Django's cache.

Each user gets RECOVERY_CODE_RATE_LIMIT attempts per RECOVERY_CODE_RATE_WINDOW_S,
counted across the paste form and the OAuth redirect. The default cache is per
process; configure a shared cache (Redis) to make the limit site-wide.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache


async def code_attempt_allowed(user_id: int, *, now_s: float | None = None) -> bool:
    """Count one attempt for `user_id`; return False when the window's limit is used up."""
    window_s = max(1, settings.RECOVERY_CODE_RATE_WINDOW_S)
    window = int((time.time() if now_s is None else now_s) // window_s)
    key = f"recovery:code-attempts:{user_id}:{window}"
    # add() is atomic: the first attempt of a window creates the counter.
    if await cache.aadd(key, 1, timeout=window_s + 1):
        count = 1
    else:
        try:
            count = await cache.aincr(key)
        except ValueError:  # expired between add and incr
            await cache.aadd(key, 1, timeout=window_s + 1)
            count = 1
    return count <= settings.RECOVERY_CODE_RATE_LIMIT
