"""Fixtures for recovery: the fake Upstox login server, a controllable clock, users."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

import recovery.clock
from recovery.brokers import use_exchanges
from recovery.upstox import IST, UpstoxApp, UpstoxTokenExchange
from tests.recovery.clocks import FakeClock
from tests.recovery.fake_upstox_auth import DIALOG_PATH, TOKEN_PATH, FakeUpstoxAuth

# 20:00 IST on a Tuesday: outside the blackout, 7.5 hours before the daily expiry.
EVENING_IST = datetime(2026, 3, 10, 20, 0, tzinfo=IST).astimezone(UTC)
REDIRECT_URI = "http://testserver/recovery/callback/upstox"


def start_fake(client_id: str = "app-one", redirect_uri: str = REDIRECT_URI) -> FakeUpstoxAuth:
    return FakeUpstoxAuth(client_id=client_id, client_secret=f"{client_id}-secret", redirect_uri=redirect_uri).start()


def exchange_for(
    fake: FakeUpstoxAuth, *, broker: str = "upstox", client_secret: str | None = None
) -> UpstoxTokenExchange:
    return UpstoxTokenExchange(
        UpstoxApp(
            broker=broker,
            client_id=fake.client_id,
            client_secret=fake.client_secret if client_secret is None else client_secret,
            redirect_uri=fake.redirect_uri,
            authorize_url=fake.url + DIALOG_PATH,
            token_url=fake.url + TOKEN_PATH,
            timeout_s=5.0,
        )
    )


@pytest.fixture
def fake_upstox() -> Iterator[FakeUpstoxAuth]:
    fake = start_fake()
    yield fake
    fake.stop()


@pytest.fixture
def upstox(fake_upstox: FakeUpstoxAuth) -> Iterator[UpstoxTokenExchange]:
    exchange = exchange_for(fake_upstox)
    with use_exchanges([exchange]):
        yield exchange


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(EVENING_IST)
    monkeypatch.setattr(recovery.clock, "system_clock", fake)
    return fake


@pytest.fixture(autouse=True)
def fast_recovery_settings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RECOVERY_TOKEN_STATE_POLL_S = 0.02
    settings.RECOVERY_PROVISIONED_POLL_S = 0.02
    settings.RECOVERY_CODE_RATE_LIMIT = 50


@pytest.fixture(autouse=True)
def clear_rate_limit_cache() -> None:
    from django.core.cache import cache

    cache.clear()


class PollTicks:
    """A poll sleep that returns only when the test grants a tick: "one poll" is exact."""

    def __init__(self) -> None:
        self._ticks: asyncio.Queue[None] = asyncio.Queue()
        self.waiting = 0

    async def __call__(self, seconds: float) -> None:
        self.waiting += 1
        try:
            await self._ticks.get()
        finally:
            self.waiting -= 1

    def tick(self) -> None:
        self._ticks.put_nowait(None)


async def wait_until(predicate, *, timeout_s: float = 10.0):  # type: ignore[no-untyped-def]
    """Poll a plain (sync) predicate from async code until it holds."""
    from tests.helpers import async_eventually

    async def check():  # type: ignore[no-untyped-def]
        return predicate()

    return await async_eventually(check, timeout_s=timeout_s, interval_s=0.01)
