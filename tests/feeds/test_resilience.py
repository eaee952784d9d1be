"""Backoff with full jitter, the circuit breaker and the fail-closed token bucket."""

from __future__ import annotations

import random

import pytest

from core.health import Status
from feeds.streams.backoff import FullJitterBackoff
from feeds.streams.breaker import BreakerState, CircuitBreaker
from feeds.streams.venue_limiter import RateLimitDenied, RateLimiterRegistry, VenueRateLimiter
from feeds.venues.base import PublishedLimits
from tests.feeds.doubles import FakeClock


def test_backoff_delays_stay_within_the_exponential_ceiling() -> None:
    backoff = FullJitterBackoff(initial_s=0.5, max_s=8.0, rng=random.Random(1))
    ceilings = [0.5, 1, 2, 4, 8, 8, 8]
    for ceiling in ceilings:
        assert 0 <= backoff.next_delay() <= ceiling


def test_backoff_is_jittered_so_streams_do_not_retry_in_lockstep() -> None:
    streams = [FullJitterBackoff(initial_s=1, max_s=30, rng=random.Random(seed)) for seed in range(10)]
    third_delays = [[b.next_delay() for _ in range(3)][-1] for b in streams]
    assert len({round(d, 6) for d in third_delays}) == 10


def test_backoff_reset_starts_over() -> None:
    backoff = FullJitterBackoff(initial_s=1, max_s=30, rng=random.Random(3))
    for _ in range(6):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() <= 1


def test_breaker_opens_after_the_threshold_of_consecutive_failures() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=10, cooldown_s=60, clock=clock)
    for _ in range(9):
        breaker.record_failure("refused")
        assert breaker.allow_attempt()
    assert breaker.health()[0] is Status.DEGRADED
    breaker.record_failure("refused")
    assert breaker.state is BreakerState.OPEN and not breaker.allow_attempt()
    status, reason = breaker.health()
    assert status is Status.BLOCKED and "refused" in reason


def test_breaker_half_opens_after_the_cooldown_and_closes_on_success() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=60, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.advance(59)
    assert not breaker.allow_attempt() and breaker.retry_after_s() == pytest.approx(1)
    clock.advance(1)
    assert breaker.state is BreakerState.HALF_OPEN and breaker.allow_attempt()
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED and breaker.health() == (Status.HEALTHY, "")


def test_failed_half_open_probe_opens_the_breaker_again() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=10, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.advance(10)
    assert breaker.allow_attempt()
    breaker.record_failure("still refused")
    assert breaker.state is BreakerState.OPEN and breaker.times_opened == 2


def test_success_resets_the_failure_count() -> None:
    breaker = CircuitBreaker(failure_threshold=3)
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


async def test_rate_limiter_takes_a_fraction_of_the_published_limit_and_fails_closed() -> None:
    limits = PublishedLimits(
        rest_weight=100, rest_period_s=3600, trades_request_weight=20, dials=4, dial_period_s=3600, messages_per_s=None
    )
    limiter = VenueRateLimiter(limits, fraction=0.5, max_wait_s=0.01)
    await limiter.acquire_rest()
    await limiter.acquire_rest()  # 40 of the 50 allowed
    with pytest.raises(RateLimitDenied):
        await limiter.acquire_rest()
    await limiter.acquire_dial()
    await limiter.acquire_dial()
    with pytest.raises(RateLimitDenied):
        await limiter.acquire_dial()
    assert limiter.denied == 2
    assert limiter.message_limiter() is None


def test_registry_shares_one_limiter_per_venue() -> None:
    registry = RateLimiterRegistry()
    assert registry.for_venue("binance-usdm") is registry.for_venue("binance-usdm")
    assert registry.for_venue("binance-usdm") is not registry.for_venue("bitflyer")
    assert registry.for_venue("binance-usdm").limits.rest_weight == 2400


def test_default_settings_detect_a_half_open_connection_within_thirty_seconds() -> None:
    from feeds.streams.stream_settings import feed_stream_settings

    transport = feed_stream_settings().transport
    # Worst case: the connection goes half-open just after a pong; the next ping leaves
    # one interval later and is given up on after the timeout, then the close times out.
    worst_case_s = transport.ping_interval_s + transport.ping_timeout_s + transport.close_timeout_s
    assert worst_case_s < 30
    assert feed_stream_settings().policy.breaker_threshold == 10
