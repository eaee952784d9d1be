"""Prompts: coalesced by recovery URL, resolved one at a time, cleared out of band, terminal on bad credentials."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import close_old_connections

from recovery.brokers import use_exchanges
from recovery.models import AuthPrompt, BrokerToken, PromptResolution
from recovery.recover import PromptNotOpen, prompt_recover
from recovery.selectors import prompt_for_user, prompts_open_for_user
from recovery.services import token_await_auth, token_expire_due, token_reset_if_config_changed, token_store_valid
from recovery.tokens import NonRecoverableTokenError, TokenKey, TokenKind, TokenState
from recovery.upstox import UpstoxTokenExchange
from tests.recovery.clocks import FakeClock
from tests.recovery.conftest import exchange_for, start_fake
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth

pytestmark = pytest.mark.django_db(transaction=True)
UPSTOX = TokenKey("upstox", TokenKind.OAUTH)
SECOND = TokenKey("upstox-b", TokenKind.OAUTH)


@pytest.fixture
def two_brokers() -> Iterator[tuple[FakeUpstoxAuth, FakeUpstoxAuth]]:
    first, second = start_fake("app-one"), start_fake("app-two")
    with use_exchanges([exchange_for(first), exchange_for(second, broker="upstox-b")]):
        yield first, second
    first.stop()
    second.stop()


@database_sync_to_async
def make_owner(username: str = "owner", *, staff: bool = False, superuser: bool = False):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_user(
        username, password="pw-long-enough-123", is_staff=staff or superuser, is_superuser=superuser
    )
    return user


@database_sync_to_async
def open_prompts(key: TokenKey | None = None) -> list[AuthPrompt]:
    prompts = AuthPrompt.objects.filter(resolved_at__isnull=True)
    if key is not None:
        prompts = prompts.filter(broker=key.broker, kind=key.kind.value)
    return list(prompts)


@database_sync_to_async
def state_of(key: TokenKey) -> str:
    return BrokerToken.objects.get(broker=key.broker, kind=key.kind.value).state


async def log_in(fake: FakeUpstoxAuth, key: TokenKey, clock: FakeClock) -> None:
    exchange = exchange_for(fake, broker=key.broker)
    grant = await exchange.exchange(fake.log_in(), now=clock.now())
    await database_sync_to_async(token_store_valid)(key=key, grant=grant)


async def test_repeated_awaiting_auth_reports_share_one_prompt_and_recovery_token(upstox: UpstoxTokenExchange) -> None:
    for reason in ("expired", "UDAPI100050 from orders", "UDAPI100050 from feed"):
        await database_sync_to_async(token_await_auth)(key=UPSTOX, reason=reason)
    prompts = await open_prompts()
    assert len(prompts) == 1
    prompt = prompts[0]
    assert prompt.recovery_key == upstox.authorization_url(None)
    assert f"state={prompt.recovery_token}" in prompt.login_url


@pytest.mark.needs_postgres
async def test_concurrent_awaiting_auth_from_many_threads_opens_one_prompt(upstox: UpstoxTokenExchange) -> None:
    barrier = threading.Barrier(6)

    def report(n: int) -> None:
        barrier.wait()
        try:
            token_await_auth(key=UPSTOX, reason=f"reporter {n}")
        finally:
            close_old_connections()

    await database_sync_to_async(token_await_auth)(key=UPSTOX, reason="seed")  # the row exists
    await database_sync_to_async(lambda: AuthPrompt.objects.all().delete())()
    await asyncio.gather(*(sync_to_async(report, thread_sensitive=False)(n) for n in range(6)))
    assert len(await open_prompts()) == 1


async def test_two_brokers_expiring_together_get_two_prompts_and_recovering_one_keeps_the_other(
    two_brokers: tuple[FakeUpstoxAuth, FakeUpstoxAuth], clock: FakeClock
) -> None:
    first, second = two_brokers
    owner = await make_owner()
    await log_in(first, UPSTOX, clock)
    await log_in(second, SECOND, clock)
    await database_sync_to_async(lambda: BrokerToken.objects.update(owner=owner))()
    clock.advance(timedelta(days=1))
    assert await database_sync_to_async(token_expire_due)(now=clock.now()) == 2
    prompts = {p.broker: p for p in await open_prompts()}
    assert set(prompts) == {"upstox", "upstox-b"}
    assert prompts["upstox"].recovery_token != prompts["upstox-b"].recovery_token
    clock.set(clock.now().replace(hour=12))  # 17:30 IST: outside the blackout

    await prompt_recover(
        user=owner, recovery_token=str(prompts["upstox"].recovery_token), code=first.log_in(), now=clock.now()
    )

    assert await state_of(UPSTOX) == TokenState.VALID
    assert await state_of(SECOND) == TokenState.AWAITING_AUTH
    remaining = await open_prompts()
    assert [p.recovery_token for p in remaining] == [prompts["upstox-b"].recovery_token]
    resolved = await database_sync_to_async(AuthPrompt.objects.get)(pk=prompts["upstox"].pk)
    assert resolved.resolution == PromptResolution.RECOVERED


async def test_a_token_made_valid_out_of_band_clears_its_stale_prompt(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    await database_sync_to_async(token_await_auth)(key=UPSTOX, reason="expired")
    [prompt] = await open_prompts()
    await log_in(fake_upstox, UPSTOX, clock)  # e.g. stored by another process
    assert await open_prompts() == []
    prompt = await database_sync_to_async(AuthPrompt.objects.get)(pk=prompt.pk)
    assert prompt.resolution == PromptResolution.VALID_OUT_OF_BAND


async def test_wrong_app_credentials_turn_the_prompt_terminal_and_stop_the_loop(
    fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    owner = await make_owner(superuser=True)  # the token is unowned: superusers answer it
    with use_exchanges([exchange_for(fake_upstox, client_secret="wrong-secret")]):
        await database_sync_to_async(token_await_auth)(key=UPSTOX, reason="first start")
        [login_prompt] = await open_prompts()
        with pytest.raises(NonRecoverableTokenError, match="UDAPI100016"):
            await prompt_recover(
                user=owner, recovery_token=str(login_prompt.recovery_token), code=fake_upstox.log_in(), now=clock.now()
            )
        assert await state_of(UPSTOX) == TokenState.FAILED
        [terminal] = await open_prompts()
        assert terminal.terminal and terminal.login_url == "" and "UDAPI100016" in terminal.message

        # No loop: expiry and 401 reports leave FAILED alone; codes are refused without calling the broker.
        await database_sync_to_async(token_await_auth)(key=UPSTOX, reason="UDAPI100050")
        assert await state_of(UPSTOX) == TokenState.FAILED
        calls = len(fake_upstox.token_requests)
        with pytest.raises(NonRecoverableTokenError):
            await prompt_recover(user=owner, recovery_token=str(terminal.recovery_token), code="x", now=clock.now())
        assert len(fake_upstox.token_requests) == calls

    # Fixed credentials (a restart with a new secret) bring the login prompt back.
    fixed = exchange_for(fake_upstox)
    with use_exchanges([fixed]):
        assert await database_sync_to_async(token_reset_if_config_changed)(
            key=UPSTOX, config_fingerprint=fixed.config_fingerprint
        )
        [prompt] = await open_prompts()
        assert not prompt.terminal
        await prompt_recover(
            user=owner, recovery_token=str(prompt.recovery_token), code=fake_upstox.log_in(), now=clock.now()
        )
    assert await state_of(UPSTOX) == TokenState.VALID


async def test_prompts_are_visible_only_to_their_owner_or_to_superusers_when_unowned(
    upstox: UpstoxTokenExchange, clock: FakeClock
) -> None:
    owner, other, staff = await make_owner("owner"), await make_owner("other"), await make_owner("ops", staff=True)
    root = await make_owner("root", superuser=True)
    await database_sync_to_async(token_await_auth)(key=UPSTOX, reason="expired")
    [prompt] = await open_prompts()
    token = str(prompt.recovery_token)
    assert await database_sync_to_async(prompt_for_user)(user=root, recovery_token=token) is not None
    assert await database_sync_to_async(prompt_for_user)(user=staff, recovery_token=token) is None
    assert await database_sync_to_async(prompt_for_user)(user=owner, recovery_token=token) is None

    await database_sync_to_async(lambda: AuthPrompt.objects.update(owner=owner))()
    assert await database_sync_to_async(lambda: list(prompts_open_for_user(owner)))() == [prompt]
    assert await database_sync_to_async(lambda: list(prompts_open_for_user(other)))() == []
    assert await database_sync_to_async(lambda: list(prompts_open_for_user(staff)))() == []
    assert await database_sync_to_async(lambda: list(prompts_open_for_user(root)))() == []
    with pytest.raises(PromptNotOpen):
        await prompt_recover(user=other, recovery_token=token, code="code", now=clock.now())
