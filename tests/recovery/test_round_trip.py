"""The whole recovery loop, through the real web view and a websocket client, and a leak scan.

expire at 03:30 IST -> prompt pushed to the owner's dashboard -> a code in the blackout is
refused -> a code after 08:00 is accepted -> VALID -> prompt cleared on the dashboard ->
the stopped datasource resumes with the new token. Nothing anywhere shows the token.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client

from core.health import HealthBoard
from recovery.coordinator import AuthStateCoordinator
from recovery.datasource import TokenSource
from recovery.models import BrokerToken
from recovery.services import token_store_valid
from recovery.startup import build_auth_state
from recovery.tokens import AccessToken, TokenKey, TokenKind, TokenState, TokenUnavailable
from recovery.upstox import IST, UpstoxTokenExchange
from tests.recovery.clocks import FakeClock
from tests.recovery.conftest import wait_until
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth
from tradingsite.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
KEY = TokenKey("upstox", TokenKind.OAUTH)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # a browser sends both; the origin must be the host's own
PASSWORD = "pw-long-enough-123"


class StoppableDataSource:
    """A datasource that stops on a token problem and is resumed by the coordinator."""

    name = "test-upstox-feed"

    def __init__(self, source: TokenSource) -> None:
        self.source = source
        self.running = False
        self.token: AccessToken | None = None
        self.resumes = 0

    async def start(self) -> None:
        self.token = await self.source.await_valid_token()
        self.running = True

    def stop(self) -> None:
        self.running = False

    async def resume_if_stopped(self) -> None:
        self.resumes += 1
        if not self.running:
            await self.start()


@database_sync_to_async
def owner_with_session() -> tuple[Any, bytes]:
    user = get_user_model().objects.create_user("owner", password=PASSWORD)
    client = Client()
    client.force_login(user)
    return user, f"sessionid={client.cookies['sessionid'].value}".encode()


async def ws_messages_until(
    communicator: WebsocketCommunicator, done: Any, seen: list[dict[str, Any]]
) -> dict[str, Any]:
    while True:
        message = await communicator.receive_json_from(timeout=10)
        seen.append(message)
        if done(message):
            return message


async def test_expire_prompt_code_valid_cleared_and_datasource_resumed_without_leaking_the_token(
    upstox: UpstoxTokenExchange, fake_upstox: FakeUpstoxAuth, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    owner, cookie = await owner_with_session()
    first = await upstox.exchange(fake_upstox.log_in(), now=clock.now())
    await database_sync_to_async(token_store_valid)(key=KEY, grant=first, config_fingerprint=upstox.config_fingerprint)
    await database_sync_to_async(lambda: BrokerToken.objects.update(owner=owner))()

    auth_state = build_auth_state(clock=clock)
    datasource = StoppableDataSource(auth_state.token_source(KEY))
    auth_state.register_datasource(KEY, datasource)
    manager = auth_state.oauth[KEY]
    await manager.refresh()
    health = HealthBoard()
    tasks = [asyncio.create_task(manager.run()), asyncio.create_task(AuthStateCoordinator(auth_state, health).run())]
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
    web = AsyncClient()
    await web.aforce_login(owner)
    seen_ws: list[dict[str, Any]] = []
    pages: list[str] = []
    try:
        connected, _ = await communicator.connect()
        assert connected
        await datasource.start()
        assert datasource.token == first.access_token

        # 03:30 IST: the expiry timer retires the token; the prompt reaches the dashboard.
        clock.set(first.expires_at)
        opened = await ws_messages_until(
            communicator, lambda m: m.get("type") == "prompt" and m["action"] == "open", seen_ws
        )
        prompt = opened["prompt"]
        assert prompt["broker"] == "upstox" and not prompt["terminal"]
        assert f"state={prompt['recovery_token']}" in prompt["login_url"]
        datasource.stop()  # its next request got a 401: it stops and waits to be resumed
        await wait_until(
            lambda: health.get(f"token:{KEY}") is not None and health.get(f"token:{KEY}").status == "DEGRADED"
        )

        dashboard = await web.get("/")
        pages.append(dashboard.content.decode())
        assert prompt["recovery_token"] in pages[-1]

        # 04:00 IST is inside the blackout: refused with a clear message, state unchanged.
        clock.set(datetime(2026, 3, 11, 4, 0, tzinfo=IST).astimezone(UTC))
        code = fake_upstox.log_in()
        refused = await web.post(prompt["submit_url"], {"code": code}, headers={"Accept": "application/json"})
        pages.append(refused.content.decode())
        assert refused.status_code == 409 and "08:00 IST" in refused.json()["message"]
        assert (
            await database_sync_to_async(BrokerToken.objects.get)(broker="upstox")
        ).state == TokenState.AWAITING_AUTH
        updated = await ws_messages_until(
            communicator, lambda m: m.get("type") == "prompt" and m["prompt"]["last_error"], seen_ws
        )
        assert "08:00 IST" in updated["prompt"]["last_error"]

        # After 08:00 IST the same (unspent) code is accepted.
        clock.set(datetime(2026, 3, 11, 8, 1, tzinfo=IST).astimezone(UTC))
        accepted = await web.post(prompt["submit_url"], {"code": code}, headers={"Accept": "application/json"})
        pages.append(accepted.content.decode())
        assert accepted.status_code == 200 and accepted.json()["ok"]
        await ws_messages_until(
            communicator,
            lambda m: (
                m.get("type") == "prompt" and m["action"] == "clear" and m["recovery_token"] == prompt["recovery_token"]
            ),
            seen_ws,
        )
        await wait_until(lambda: datasource.running)
        assert datasource.token is not None and datasource.token != first.access_token
        assert datasource.token.reveal() in fake_upstox.tokens
        assert datasource.resumes == 1
        await wait_until(lambda: health.get(f"token:{KEY}").status == "HEALTHY")

        listing = await web.get("/recovery/prompts.json")
        pages.append(listing.content.decode())
        assert listing.json() == {"prompts": []}
    finally:
        await communicator.disconnect()
        for task in tasks:
            task.cancel()

    # The scan: every issued token (and extended token never stored) must be absent everywhere.
    issued = list(fake_upstox.issued)
    assert len(issued) == 2
    surfaces = {
        "html/json": "\n".join(pages),
        "websocket": repr(seen_ws),
        "logs": "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records),
        "health": repr(health.snapshot()),
    }
    for surface, text in surfaces.items():
        for token in issued:
            assert token not in text, f"a broker token leaked into {surface}"


async def test_a_terminal_failure_makes_waiting_datasources_see_token_unavailable(
    fake_upstox: FakeUpstoxAuth, clock: FakeClock
) -> None:
    from recovery.brokers import use_exchanges
    from tests.recovery.conftest import exchange_for

    owner, _ = await owner_with_session()
    with use_exchanges([exchange_for(fake_upstox, client_secret="wrong")]):
        auth_state = build_auth_state(clock=clock)
        manager = auth_state.oauth[KEY]
        await manager.refresh()
        coordinator = AuthStateCoordinator(auth_state, HealthBoard())
        tasks = [asyncio.create_task(manager.run()), asyncio.create_task(coordinator.run())]
        try:
            waiter = asyncio.create_task(auth_state.token_source(KEY).await_valid_token())
            from recovery.selectors import prompts_open_for_user

            await database_sync_to_async(lambda: BrokerToken.objects.update(owner=owner))()
            await wait_until(lambda: manager.status.state is TokenState.AWAITING_AUTH)
            from recovery.models import AuthPrompt

            await database_sync_to_async(lambda: AuthPrompt.objects.update(owner=owner))()
            [prompt] = await database_sync_to_async(lambda: list(prompts_open_for_user(owner)))()
            web = AsyncClient()
            await web.aforce_login(owner)
            response = await web.post(
                f"/recovery/prompts/{prompt.recovery_token}/code",
                {"code": fake_upstox.log_in()},
                headers={"Accept": "application/json"},
            )
            assert response.status_code == 409 and "UDAPI100016" in response.json()["message"]
            with pytest.raises(TokenUnavailable, match="UDAPI100016"):
                await asyncio.wait_for(waiter, timeout=10)
        finally:
            for task in tasks:
                task.cancel()
