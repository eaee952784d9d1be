"""The Upstox code exchange against the local fake: the production client, the real protocol."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recovery.tokens import AuthCodeRejected, NonRecoverableTokenError, TokenBlackout, TokenExchangeUnavailable
from recovery.upstox import IST, UpstoxApp, UpstoxTokenExchange
from tests.recovery.conftest import EVENING_IST, exchange_for
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth


async def test_a_fresh_code_buys_a_token_that_expires_at_0330_ist(fake_upstox: FakeUpstoxAuth) -> None:
    grant = await exchange_for(fake_upstox).exchange(fake_upstox.log_in(), now=EVENING_IST)
    assert grant.access_token.reveal() in fake_upstox.tokens
    assert grant.expires_at == datetime(2026, 3, 11, 3, 30, tzinfo=IST)
    assert grant.broker_user_id == "AB1234"
    sent = fake_upstox.token_requests[-1]
    assert sent["grant_type"] == "authorization_code"
    assert sent["redirect_uri"] == fake_upstox.redirect_uri and sent["client_id"] == fake_upstox.client_id


async def test_a_code_works_once_even_when_the_first_use_failed(fake_upstox: FakeUpstoxAuth) -> None:
    exchange = exchange_for(fake_upstox)
    code = fake_upstox.log_in()
    fake_upstox.fail_next_token = (500, "UDAPI100500")
    with pytest.raises(TokenExchangeUnavailable):
        await exchange.exchange(code, now=EVENING_IST)
    with pytest.raises(AuthCodeRejected, match="works once"):
        await exchange.exchange(code, now=EVENING_IST)


async def test_a_made_up_code_is_rejected_as_a_code_problem(fake_upstox: FakeUpstoxAuth) -> None:
    with pytest.raises(AuthCodeRejected, match="UDAPI100036"):
        await exchange_for(fake_upstox).exchange("not-a-code", now=EVENING_IST)


async def test_a_wrong_client_secret_is_non_recoverable(fake_upstox: FakeUpstoxAuth) -> None:
    with pytest.raises(NonRecoverableTokenError) as caught:
        await exchange_for(fake_upstox, client_secret="wrong").exchange(fake_upstox.log_in(), now=EVENING_IST)
    assert caught.value.error_code == "UDAPI100016"
    assert "UPSTOX_CLIENT_SECRET" in str(caught.value)


async def test_blackout_refuses_before_spending_the_code(fake_upstox: FakeUpstoxAuth) -> None:
    code = fake_upstox.log_in()
    at_0400 = datetime(2026, 3, 11, 4, 0, tzinfo=IST).astimezone(UTC)
    with pytest.raises(TokenBlackout, match="after 08:00 IST"):
        await exchange_for(fake_upstox).exchange(code, now=at_0400)
    assert fake_upstox.token_requests == []
    # The blackout ends at 08:00 and the unspent code still works.
    grant = await exchange_for(fake_upstox).exchange(code, now=at_0400 + timedelta(hours=4))
    assert grant.access_token.reveal() in fake_upstox.tokens


async def test_rate_limit_and_unreachable_broker_are_transient(fake_upstox: FakeUpstoxAuth) -> None:
    fake_upstox.fail_next_token = (429, "UDAPI10005")
    with pytest.raises(TokenExchangeUnavailable):
        await exchange_for(fake_upstox).exchange(fake_upstox.log_in(), now=EVENING_IST)
    unreachable = UpstoxTokenExchange(
        UpstoxApp("upstox", "c", "s", "r", token_url="http://127.0.0.1:9/v2/login/authorization/token", timeout_s=1)
    )
    with pytest.raises(TokenExchangeUnavailable, match="unreachable"):
        await unreachable.exchange("code", now=EVENING_IST)
