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

from core.push_groups import MARKET_GROUP, user_group
from dashboard.consumers import CLOSE_STALLED, DashboardConsumer
from orders.models import Account, TradeSetting
from processor.models import Strategy
from processor.signals import Signal, SignalKind
from tests.orders.factories import make_signal, make_strategy
from tradingsite.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # a browser sends both; the origin must be the host's own


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
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def prices(n: int) -> dict[str, Any]:
    return {
        "type": "market.prices",
        "prices": [
            {
                "feed": "sim",
                "symbol": "BTC-USD",
                "price": f"{64000 + n}",
                "open": "64000",
                "volume": "1",
                "ticks": n,
                "ts_ms": n,
            },
        ],
    }


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
        await layer.group_send(
            user_group(alice_id), {"type": "orders.trade", "event": "order", "client_order_id": "ts-1-x"}
        )
        await layer.group_send(
            user_group(alice_id), {"type": "recovery.prompt", "action": "clear", "recovery_token": "t"}
        )
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
    row = {
        "strategy_id": strategy.pk,
        "strategy": "ema-x",
        "feed": "sim",
        "symbol": "BTC-USD",
        "venue_symbol": "BTC-USD",
        "kind": "ENTRY_LONG",
        "price": "64000",
        "emitted_ms": 1,
        "occurrence_time_ms": 1,
        "output_id": "o1",
    }
    try:
        await layer.group_send(MARKET_GROUP, {"type": "strategy.signal", "signals": [row]})
        message = await alice.receive_json_from(timeout=5)
        assert message["type"] == "strategy.signal" and message["signals"] == [row]
        assert await bob.receive_nothing(timeout=0.5)
    finally:
        await alice.disconnect()
        await bob.disconnect()


@database_sync_to_async
def _account_of(user_id: int) -> int:
    return Account.objects.get(owner_id=user_id).pk


@database_sync_to_async
def _record(
    strategy: Strategy, account_id: int | None, outcome: str, *, rolled_back: bool = False, **fields: str
) -> Signal:
    from django.db import transaction

    from orders.outcomes import signal_outcome_record

    signal = make_signal(strategy, SignalKind.ENTRY_LONG)
    if not rolled_back:
        signal_outcome_record(signal=signal, account_id=account_id, outcome=outcome, **fields)
        return signal
    with pytest.raises(RuntimeError), transaction.atomic():
        signal_outcome_record(signal=signal, account_id=account_id, outcome=outcome, **fields)
        raise RuntimeError("the executor's transaction failed after the decision")
    return signal


async def test_a_signal_outcome_reaches_the_accounts_owner_and_no_one_else() -> None:
    strategy = await database_sync_to_async(make_strategy)("ema-shared")
    alice_id, alice_cookie = await trader("alice", strategy)
    _, bob_cookie = await trader("bob", strategy)  # bob sees the signal itself, never alice's outcome of it
    alice, bob = await connect(alice_cookie), await connect(bob_cookie)
    try:
        signal = await _record(strategy, await _account_of(alice_id), "placed", client_order_id="ts-1-abc")
        message = await alice.receive_json_from(timeout=5)
        assert message["type"] == "signal.outcome"
        assert (message["output_id"], message["kind"], message["strategy_id"]) == (
            signal.output_id,
            "ENTRY_LONG",
            strategy.pk,
        )
        assert (message["outcome"], message["outcome_label"], message["client_order_id"]) == (
            "placed",
            "Traded",
            "ts-1-abc",
        )
        assert (message["traded"], message["settled"], message["account_name"]) == (True, True, "main")
        assert await bob.receive_nothing(timeout=0.5)
    finally:
        await alice.disconnect()
        await bob.disconnect()


async def test_an_outcome_rolled_back_with_its_transaction_is_never_pushed() -> None:
    strategy = await database_sync_to_async(make_strategy)("ema-rollback")
    alice_id, alice_cookie = await trader("alice", strategy)
    alice = await connect(alice_cookie)
    try:
        await _record(strategy, await _account_of(alice_id), "halted", rolled_back=True)
        assert await alice.receive_nothing(timeout=0.5)
        settled = await _record(strategy, await _account_of(alice_id), "halted", reason="global kill switch engaged")
        message = await alice.receive_json_from(timeout=5)  # the next decision still arrives
        assert (message["output_id"], message["outcome"], message["traded"]) == (settled.output_id, "halted", False)
    finally:
        await alice.disconnect()


async def test_an_outcome_that_reached_no_account_goes_to_everyone_who_sees_the_strategy() -> None:
    strategy = await database_sync_to_async(make_strategy)("ema-unrouted")
    _, alice_cookie = await trader("alice", strategy)
    _, bob_cookie = await trader("bob", strategy)
    _, carol_cookie = await trader("carol")
    alice, bob, carol = await connect(alice_cookie), await connect(bob_cookie), await connect(carol_cookie)
    try:
        signal = await _record(strategy, None, "no_trade_setting")
        for browser in (alice, bob):
            message = await browser.receive_json_from(timeout=5)
            assert (message["type"], message["output_id"], message["account"]) == (
                "signal.outcome",
                signal.output_id,
                None,
            )
            assert message["outcome"] == "no_trade_setting" and message["settled"] and not message["traded"]
        assert await carol.receive_nothing(timeout=0.5)
    finally:
        for browser in (alice, bob, carol):
            await browser.disconnect()


async def test_settling_an_unknown_outcome_pushes_the_new_outcome() -> None:
    strategy = await database_sync_to_async(make_strategy)("ema-settle")
    alice_id, alice_cookie = await trader("alice", strategy)
    alice = await connect(alice_cookie)
    try:
        signal = await _record(strategy, await _account_of(alice_id), "unknown", client_order_id="ts-1-unk")
        first = await alice.receive_json_from(timeout=5)
        assert (first["outcome"], first["settled"]) == ("unknown", False)
        await alice.send_json_to({"type": "ack", "seq": first["seq"]})
        from orders.outcomes import signal_outcome_settle

        changed = await database_sync_to_async(signal_outcome_settle)(
            client_order_id="ts-1-unk", outcome="placed", reason="adopted by reconciliation"
        )
        assert changed == 1
        second = await alice.receive_json_from(timeout=5)
        assert (second["output_id"], second["outcome"], second["traded"]) == (signal.output_id, "placed", True)
        assert second["reason"] == "adopted by reconciliation"
    finally:
        await alice.disconnect()
