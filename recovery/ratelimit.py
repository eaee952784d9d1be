"""A limit on auth-code submissions per user, shared by every web process when Redis is configured.

Each user gets RECOVERY_CODE_RATE_LIMIT attempts per RECOVERY_CODE_RATE_WINDOW_S (a
moving window), counted across the paste form and the OAuth redirect. With REDIS_URL
the window lives in Redis (core.shared_limits), so a user spreading attempts over
several web processes still gets the limit once; without, in this process. When Redis
does not answer, the attempt is refused: a login code is worth guessing, and failing
open would let a Redis outage lift the limit.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model

from core.shared_limits import SharedWindows, StorageError, window

log = logging.getLogger(__name__)


def _date_joined(user_id: int) -> datetime | None:
    joined: datetime | None = get_user_model().objects.filter(pk=user_id).values_list("date_joined", flat=True).first()
    return joined


@functools.cache
def _windows(redis_url: str) -> SharedWindows:
    return SharedWindows(redis_url or None, key_prefix="tradingsite:recovery-limits")


async def code_attempt_allowed(user_id: int) -> bool:
    """Count one attempt for `user_id`; return False when the window's limit is used up."""
    item = window(settings.RECOVERY_CODE_RATE_LIMIT, settings.RECOVERY_CODE_RATE_WINDOW_S)
    # The window outlives the database's ids in Redis: a user id handed out again after a
    # database reset is another person, so the key names the account's creation too.
    joined = await database_sync_to_async(_date_joined)(user_id)
    who = f"{user_id}@{joined.timestamp():.6f}" if joined is not None else str(user_id)
    try:
        return await _windows(settings.REDIS_URL).hit(item, "code-attempts", who)
    except StorageError as exc:
        log.warning("auth-code attempt of user %s refused: the shared limit is unavailable (%r)", user_id, exc)
        return False
