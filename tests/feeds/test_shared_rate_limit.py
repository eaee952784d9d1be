"""A venue's rate limit is one budget for every process of the deployment (Redis), or per process without.

The shared cases use the real Redis of this run: separate limiter instances with their
own connections, and two real processes racing for one window. Each test names a venue
of its own, so no window is shared between tests or runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model

from core.shared_limits import SharedWindows, limits_uri
from feeds.streams.venue_limiter import RateLimitDenied, RateLimiterRegistry, VenueRateLimiter
from feeds.venues.base import PublishedLimits
from recovery import ratelimit

ROOT = Path(__file__).resolve().parents[2]
# 2 dials and 10 REST weight per hour at half the published figures
LIMITS = PublishedLimits(
    rest_weight=20, rest_period_s=3600, trades_request_weight=1, dials=4, dial_period_s=3600, messages_per_s=None
)


def _venue() -> str:
    return f"test-venue-{uuid.uuid4().hex[:10]}"


def _registry(redis_url: str | None, venue: str, *, max_wait_s: float = 0.05) -> VenueRateLimiter:
    registry = RateLimiterRegistry(max_wait_s=max_wait_s, limits={venue: LIMITS}, redis_url=redis_url)
    return registry.for_venue(venue)


async def _granted_dials(limiter: VenueRateLimiter, tries: int) -> int:
    granted = 0
    for _ in range(tries):
        try:
            await limiter.acquire_dial()
        except RateLimitDenied:
            continue
        granted += 1
    return granted


@pytest.mark.needs_redis
async def test_two_limiters_on_one_redis_share_the_venues_dials() -> None:
    venue = _venue()
    first, second = _registry(settings.REDIS_URL, venue), _registry(settings.REDIS_URL, venue)
    assert first.shared is not None and first.shared is not second.shared  # own connections
    await first.acquire_dial()
    await second.acquire_dial()
    with pytest.raises(RateLimitDenied, match="shared by every process of"):
        await first.acquire_dial()
    with pytest.raises(RateLimitDenied):
        await second.acquire_dial()
    assert first.denied == second.denied == 1
    # Another venue has its own budget.
    assert await _granted_dials(_registry(settings.REDIS_URL, _venue()), 3) == 2


async def test_without_redis_each_process_keeps_its_own_budget() -> None:
    venue = _venue()
    first, second = _registry(None, venue), _registry(None, venue)
    assert first.shared is None
    assert await _granted_dials(first, 3) == 2
    assert await _granted_dials(second, 3) == 2  # a second process would get the limit again


def test_the_production_registry_shares_through_the_deployments_redis(settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/9"
    limiter = RateLimiterRegistry(limits={"x": LIMITS}).for_venue("x")
    assert limiter.shared is not None and limiter.shared.redis_url == "redis://127.0.0.1:6379/9"
    settings.REDIS_URL = ""
    assert RateLimiterRegistry(limits={"x": LIMITS}).for_venue("x").shared is None
    assert limits_uri("rediss://h:6380/2") == "async+rediss://h:6380/2"
    with pytest.raises(ValueError, match="not a Redis URL"):
        SharedWindows("http://127.0.0.1:6379/0")


@pytest.mark.needs_redis
async def test_a_full_window_waits_for_room_within_the_budget() -> None:
    venue = _venue()
    quick = PublishedLimits(
        rest_weight=2, rest_period_s=1, trades_request_weight=1, dials=2, dial_period_s=1, messages_per_s=None
    )
    patient = RateLimiterRegistry(max_wait_s=5.0, limits={venue: quick}, redis_url=settings.REDIS_URL).for_venue(venue)
    hasty = RateLimiterRegistry(max_wait_s=0.01, limits={venue: quick}, redis_url=settings.REDIS_URL).for_venue(venue)
    await patient.acquire_rest()
    with pytest.raises(RateLimitDenied):
        await hasty.acquire_rest()
    await patient.acquire_rest()  # waits until the first weight leaves the 1 s window
    assert patient.denied == 0


async def test_a_redis_that_does_not_answer_falls_back_to_this_process_budget(caplog) -> None:
    venue = _venue()
    limiter = _registry("redis://127.0.0.1:9/0", venue)  # nothing listens on port 9
    assert await _granted_dials(limiter, 3) == 2
    assert limiter.fallbacks == 3 and limiter.denied == 1
    assert sum("Redis unavailable" in record.message for record in caplog.records) == 1  # once, not per call


CHILD = """
import asyncio, sys
import django
django.setup()
import redis
from feeds.streams.venue_limiter import RateLimitDenied, RateLimiterRegistry
from feeds.venues.base import PublishedLimits

url, venue, go = sys.argv[1], sys.argv[2], sys.argv[3]
limits = PublishedLimits(rest_weight=20, rest_period_s=3600, trades_request_weight=1, dials=4,
                         dial_period_s=3600, messages_per_s=None)

async def main() -> int:
    limiter = RateLimiterRegistry(max_wait_s=0.05, limits={venue: limits}, redis_url=url).for_venue(venue)
    granted = 0
    for _ in range(15):
        try:
            await limiter.acquire_rest()
        except RateLimitDenied:
            continue
        granted += 1
    return granted

print("ready", flush=True)
redis.Redis.from_url(url).blpop([go], timeout=60)
print(asyncio.run(main()), flush=True)
"""


@pytest.mark.needs_redis
def test_two_processes_racing_for_one_window_get_the_limit_once_between_them() -> None:
    venue, go = _venue(), f"test-go-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, settings.REDIS_URL, venue, go],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        redis.Redis.from_url(settings.REDIS_URL).rpush(go, "go", "go")  # both start at once
        granted = []
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            granted.append(int(out.strip()))
    finally:
        for child in children:
            child.kill()
    assert sum(granted) == 10  # half of the published 20, once for the two processes
    assert all(count < 15 for count in granted)


@pytest.mark.needs_redis
@pytest.mark.django_db(transaction=True)
async def test_auth_code_attempts_are_counted_across_web_processes(settings) -> None:
    settings.RECOVERY_CODE_RATE_LIMIT = 3
    user_id = int(uuid.uuid4().int % 1_000_000_000) + 1_000_000_000  # an id no other run uses
    users = get_user_model().objects
    await users.acreate(pk=user_id, username=f"coder-{user_id}")
    try:
        assert await ratelimit.code_attempt_allowed(user_id)
        assert await ratelimit.code_attempt_allowed(user_id)
        ratelimit._windows.cache_clear()  # a second web process: its own connection to Redis
        assert await ratelimit.code_attempt_allowed(user_id)
        assert not await ratelimit.code_attempt_allowed(user_id)
        # After a database reset the same id is another person, with a window of their own.
        await users.filter(pk=user_id).adelete()
        await users.acreate(pk=user_id, username=f"coder-{user_id}-again")
        assert await ratelimit.code_attempt_allowed(user_id)
    finally:
        ratelimit._windows.cache_clear()


@pytest.mark.django_db(transaction=True)
async def test_without_redis_the_attempt_limit_holds_in_this_process(settings) -> None:
    settings.REDIS_URL = ""
    settings.RECOVERY_CODE_RATE_LIMIT = 2
    user_id = int(uuid.uuid4().int % 1_000_000_000)
    assert [await ratelimit.code_attempt_allowed(user_id) for _ in range(3)] == [True, True, False]


@pytest.mark.django_db(transaction=True)
async def test_an_unreachable_redis_refuses_attempts_rather_than_lifting_the_limit(settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"
    assert not await ratelimit.code_attempt_allowed(12345)
