"""OAuth token lifecycle with a controllable clock: daily expiry, stale timers, waiting callers, restarts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async

from recovery.models import AuthPrompt, BrokerToken
from recovery.oauth_manager import OAuthTokenManager
from recovery.services import token_await_auth, token_expire_due, token_fail, token_store_valid
from recovery.tokens import TokenKey, TokenKind, TokenState, TokenUnavailable
from recovery.upstox import TokenGrant, UpstoxTokenExchange
from tests.recovery.clocks import FakeClock
from tests.recovery.conftest import wait_until
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth

pytestmark = pytest.mark.django_db(transaction=True)
KEY = TokenKey("upstox", TokenKind.OAUTH)


async def log_in(exchange: UpstoxTokenExchange, fake: FakeUpstoxAuth, clock: FakeClock) -> TokenGrant:
    grant = await exchange.exchange(fake.log_in(), now=clock.now())
    await database_sync_to_async(token_store_valid)(
        key=KEY, grant=grant, config_fingerprint=exchange.config_fingerprint
    )
    return grant


@database_sync_to_async
def row() -> BrokerToken:
    return BrokerToken.objects.get(broker=KEY.broker, kind=KEY.kind.value)


@database_sync_to_async
def open_prompts() -> list[AuthPrompt]:
    return list(AuthPrompt.objects.filter(resolved_at__isnull=True))


async def test_expiry_timer_moves_valid_to_awaiting_auth_at_0330_ist_without_a_401(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    grant = await log_in(upstox, fake_upstox, clock)
    manager = OAuthTokenManager(KEY, clock=clock, poll_interval_s=0.02)
    run = asyncio.create_task(manager.run())
    try:
        await wait_until(lambda: manager.status.state is TokenState.VALID and clock.sleepers == 1)
        clock.set(grant.expires_at - timedelta(seconds=1))
        await wait_until(lambda: clock.sleepers == 1)  # the timer woke, saw 1 s left, and slept again
        assert (await row()).state == TokenState.VALID
        clock.advance(timedelta(seconds=1))
        await wait_until(lambda: manager.status.state is TokenState.AWAITING_AUTH)
        stored = await row()
        assert (stored.state, stored.ciphertext, stored.fingerprint) == (TokenState.AWAITING_AUTH, "", "")
        assert "expired" in stored.reason
        prompts = await open_prompts()
        assert len(prompts) == 1 and not prompts[0].terminal
    finally:
        run.cancel()


async def test_a_stale_expiry_timer_leaves_a_renewed_token_alone(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    old = await log_in(upstox, fake_upstox, clock)
    manager = OAuthTokenManager(KEY, clock=clock, poll_interval_s=3600)
    await manager.refresh()  # arms the timer for the old token; no polling from here on
    await wait_until(lambda: clock.sleepers == 1)
    # Renewed elsewhere (the web process) with a later expiry before this process noticed.
    renewed = TokenGrant(
        (await upstox.exchange(fake_upstox.log_in(), now=clock.now())).access_token,
        issued_at=clock.now(),
        expires_at=old.expires_at + timedelta(days=1),
    )
    await database_sync_to_async(token_store_valid)(key=KEY, grant=renewed)
    clock.set(old.expires_at + timedelta(minutes=1))
    await wait_until(lambda: manager.status.fingerprint == renewed.access_token.fingerprint)
    stored = await row()
    assert (stored.state, stored.fingerprint) == (TokenState.VALID, renewed.access_token.fingerprint)
    assert await open_prompts() == []
    # And the retirement itself is identity-checked in the database.
    assert not await database_sync_to_async(token_await_auth)(
        key=KEY, reason="late timer", expected_fingerprint=old.access_token.fingerprint
    )


async def test_await_valid_token_waits_for_the_login_then_returns_the_new_token(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    await database_sync_to_async(token_await_auth)(key=KEY, reason="first start")
    manager = OAuthTokenManager(KEY, clock=clock, poll_interval_s=0.02)
    run = asyncio.create_task(manager.run())
    try:
        waiter = asyncio.create_task(manager.await_valid_token())
        await wait_until(
            lambda: manager.status.state is TokenState.AWAITING_AUTH and manager.status.reason == "first start"
        )
        assert not waiter.done()
        grant = await log_in(upstox, fake_upstox, clock)
        token = await asyncio.wait_for(waiter, timeout=10)
        assert token == grant.access_token
    finally:
        run.cancel()


async def test_a_failed_token_makes_waiters_raise_token_unavailable(
    upstox: UpstoxTokenExchange, clock: FakeClock
) -> None:
    await database_sync_to_async(token_fail)(
        key=KEY, reason="Upstox rejected the app credentials", error_code="UDAPI100016"
    )
    manager = OAuthTokenManager(KEY, clock=clock, poll_interval_s=0.02)
    await manager.refresh()
    with pytest.raises(TokenUnavailable, match="rejected the app credentials"):
        await manager.await_valid_token()


async def test_state_survives_a_restart_encrypted_at_rest(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    grant = await log_in(upstox, fake_upstox, clock)
    stored = await row()
    assert grant.access_token.reveal() not in stored.ciphertext
    restarted = OAuthTokenManager(KEY, clock=clock, poll_interval_s=0.02)
    await restarted.refresh()
    assert restarted.status.state is TokenState.VALID
    assert await restarted.await_valid_token() == grant.access_token


async def test_a_401_for_the_current_token_asks_for_login_but_one_for_an_old_token_does_not(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    old = await log_in(upstox, fake_upstox, clock)
    new = await log_in(upstox, fake_upstox, clock)
    manager = OAuthTokenManager(KEY, clock=clock, poll_interval_s=0.02)
    await manager.refresh()
    await manager.invalidate(old.access_token.fingerprint, "UDAPI100050")
    assert manager.status.state is TokenState.VALID
    await manager.invalidate(new.access_token.fingerprint, "UDAPI100050 invalid token")
    assert manager.status.state is TokenState.AWAITING_AUTH
    assert len(await open_prompts()) == 1


async def test_periodic_expiry_job_retires_due_tokens_only(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    grant = await log_in(upstox, fake_upstox, clock)
    assert await database_sync_to_async(token_expire_due)(now=grant.expires_at - timedelta(seconds=1)) == 0
    assert await database_sync_to_async(token_expire_due)(now=grant.expires_at) == 1
    assert (await row()).state == TokenState.AWAITING_AUTH
