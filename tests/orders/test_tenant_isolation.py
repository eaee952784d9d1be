"""Tenant isolation: one user never sees or receives another's orders, positions, ledger or trade events."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from orders import selectors
from orders.executor import TradeExecutor
from orders.models import AuditEvent, Order
from processor.signals import SignalKind
from tests.orders.factories import make_setup, make_signal
from tradingsite.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # a browser sends both; the origin must be the host's own


def _cookie(user) -> bytes:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_trade_events_reach_the_owner_only(executor: TradeExecutor, settings) -> None:
    settings.DASHBOARD_BROWSER_INTERVAL_S = 0.05
    alice = await database_sync_to_async(make_setup)(username="alice")
    bob = await database_sync_to_async(make_setup)(username="bob", strategy=alice.strategy)
    await database_sync_to_async(bob.setting.delete)()  # bob trades nothing; he only watches
    browsers = {}
    for name, setup in (("alice", alice), ("bob", bob)):
        cookie = await database_sync_to_async(_cookie)(setup.account.owner)
        communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
        connected, _ = await communicator.connect()
        assert connected
        browsers[name] = communicator
    try:
        assert await executor.handle(make_signal(alice.strategy, SignalKind.ENTRY_LONG)) == ["placed"]
        seen = []
        while not any(m.get("client_order_id") for m in seen):
            message = await browsers["alice"].receive_json_from(timeout=5)
            seen += message.get("messages", [message])
        order = await database_sync_to_async(Order.objects.get)()
        assert any(m.get("client_order_id") == order.client_order_id for m in seen)
        # Alice's event has been delivered; nothing of it went to Bob.
        assert await browsers["bob"].receive_nothing(timeout=0.3)
    finally:
        for communicator in browsers.values():
            await communicator.disconnect()


def test_selectors_and_admin_scope_everything_to_the_user(executor: TradeExecutor) -> None:
    import asyncio

    alice = make_setup(username="alice2")
    bob = make_setup(username="bob2")
    asyncio.run(executor.handle(make_signal(alice.strategy, SignalKind.ENTRY_LONG)))
    order = Order.objects.get()
    a_user, b_user = alice.account.owner, bob.account.owner
    assert list(selectors.orders_for_user(a_user)) == [order]
    for query in (
        selectors.orders_for_user,
        selectors.positions_for_user,
        selectors.ledger_entries_for_user,
        selectors.fills_for_user,
        selectors.audit_events_for_user,
    ):
        assert not query(b_user).filter(account=alice.account).exists()
    assert list(selectors.ledgers_for_user(b_user)) == [bob.account.ledger]
    with pytest.raises(Order.DoesNotExist):
        selectors.order_for_user(b_user, order.pk)

    b_user.is_staff = True
    b_user.save()
    from django.contrib.auth.models import Permission

    b_user.user_permissions.set(Permission.objects.filter(content_type__app_label="orders"))
    client = Client()
    client.force_login(b_user)
    assert client.get(f"/admin/orders/order/{order.pk}/change/").status_code in (302, 404)
    listing = client.get("/admin/orders/order/")
    assert listing.status_code == 200 and order.client_order_id not in listing.content.decode()
    assert AuditEvent.objects.filter(account=alice.account).exists()
    assert order.client_order_id not in client.get("/admin/orders/auditevent/").content.decode()
