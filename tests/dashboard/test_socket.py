"""The dashboard socket: conflation per browser, acknowledgements, tenant isolation."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from feeds.publisher import MARKET_GROUP
from orders.models import Account, TradeSetting
from processor.models import Strategy
from tradingsite.asgi import application
from tradingsite.consumers import CLOSE_STALLED, DashboardConsumer, user_group

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@database_sync_to_async
def trader(username: str, strategy: Strategy | None = None) -> tuple[int, bytes]:
    """A user (with a trade setting on `strategy` when given) and their session cookie."""
    user = get_user_model().objects.create_user(username, password="pw-long-enough-123")
    if strategy is not None:
        account = Account.objects.create(owner=user, name="main", allocated_capital=Decimal("1000"))
        TradeSetting.objects.create(strategy=strategy, account=account, quantity=Decimal("1"))
    client = Client()
    client.force_login(user)
    return user.pk, f"sessionid={client.cookies['sessionid'].value}".encode()


async def connect(cookie: bytes) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def prices(n: int) -> dict[str, Any]:
    return {"type": "market.prices", "prices": [
        {"feed": "sim", "symbol": "BTC-USD", "price": f"{64000 + n}", "open": "64000", "volume": "1", "ticks": n, "ts_ms": n},
    ]}


class FrozenClock:
    """The consumer's monotonic clock, moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_burst_of_prices_reaches_the_browser_conflated_to_the_latest(settings, monkeypatch) -> None:
    settings.DASHBOARD_BROWSER_INTERVAL_S = 0.05
    clock = FrozenClock()
    monkeypatch.setattr(DashboardConsumer, "clock", staticmethod(clock))
    _, cookie = await trader("alice")
    browser = await connect(cookie)
    layer = get_channel_layer()
    try:
        await layer.group_send(MARKET_GROUP, prices(0))
        first = await browser.receive_json_from(timeout=5)  # nothing sent yet in this interval: out at once
        assert [row["price"] for row in first["prices"]] == ["64000"]
        await browser.send_json_to({"type": "ack", "seq": first["seq"]})
        for n in range(1, 200):  # all inside one interval of the consumer's clock
            await layer.group_send(MARKET_GROUP, prices(n))
        assert await browser.receive_nothing(timeout=0.3)
        clock.now += 0.05
        second = await browser.receive_json_from(timeout=5)
        # 199 pushes in one interval: one row, the latest.
        assert [row["price"] for row in second["prices"]] == ["64199"]
        assert second["seq"] == first["seq"] + 1
        assert await browser.receive_nothing(timeout=0.2)
    finally:
        await browser.disconnect()


async def test_a_browser_that_never_acknowledges_is_disconnected(settings) -> None:
    settings.DASHBOARD_BROWSER_INTERVAL_S = 0.01
    settings.DASHBOARD_MAX_UNACKED_PUSHES = 3
    _, cookie = await trader("bob")
    browser = await connect(cookie)
    layer = get_channel_layer()
    try:
        received = 0
        n = 0
        while True:
            await layer.group_send(MARKET_GROUP, prices(n))
            n += 1
            output = await browser.receive_output(timeout=5)
            if output["type"] == "websocket.close":
                assert output["code"] == CLOSE_STALLED
                break
            received += 1
        assert received == 3
    finally:
        await browser.disconnect()


async def test_private_events_reach_only_their_user() -> None:
    alice_id, alice_cookie = await trader("alice")
    _, bob_cookie = await trader("bob")
    alice, bob = await connect(alice_cookie), await connect(bob_cookie)
    layer = get_channel_layer()
    try:
        await layer.group_send(user_group(alice_id), {"type": "orders.trade", "event": "order", "client_order_id": "ts-1-x"})
        await layer.group_send(user_group(alice_id), {"type": "recovery.prompt", "action": "clear", "recovery_token": "t"})
        first = await alice.receive_json_from(timeout=5)
        assert first["type"] == "trade" and first["client_order_id"] == "ts-1-x"
        second = await alice.receive_json_from(timeout=5)
        assert second["type"] == "prompt"
        assert await bob.receive_nothing(timeout=0.5)
    finally:
        await alice.disconnect()
        await bob.disconnect()


async def test_strategy_signals_reach_only_users_whose_accounts_trade_the_strategy() -> None:
    strategy = await database_sync_to_async(Strategy.objects.create)(
        name="ema-x", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5}
    )
    _, alice_cookie = await trader("alice", strategy)
    _, bob_cookie = await trader("bob")
    alice, bob = await connect(alice_cookie), await connect(bob_cookie)
    layer = get_channel_layer()
    row = {"strategy_id": strategy.pk, "strategy": "ema-x", "feed": "sim", "symbol": "BTC-USD", "venue_symbol": "BTC-USD",
           "kind": "ENTRY_LONG", "price": "64000", "emitted_ms": 1, "occurrence_time_ms": 1, "output_id": "o1"}
    try:
        await layer.group_send(MARKET_GROUP, {"type": "strategy.signal", "signals": [row]})
        message = await alice.receive_json_from(timeout=5)
        assert message["type"] == "strategy.signal" and message["signals"] == [row]
        assert await bob.receive_nothing(timeout=0.5)
    finally:
        await alice.disconnect()
        await bob.disconnect()
