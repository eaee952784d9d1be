"""The dashboard socket through the site's real ASGI application: the handshake's Origin
must be the site's own scheme, host and port (or a CSRF trusted origin), a browser
cannot join another user's groups, and a logout ends its session's sockets."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from core.push_groups import user_group
from dashboard.consumers import CLOSE_UNAUTHENTICATED
from orders.models import Account, TradeSetting
from processor.models import Strategy
from tradingsite import asgi

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "pw-long-enough-123"


@database_sync_to_async
def logged_in(username: str, *, staff: bool = False, strategy: Strategy | None = None) -> tuple[int, Client]:
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=staff)
    if strategy is not None:
        account = Account.objects.create(owner=user, name=f"{username} main", allocated_capital=Decimal("1000"))
        TradeSetting.objects.create(strategy=strategy, account=account, quantity=Decimal("1"))
    client = Client()
    client.force_login(user)
    return user.pk, client


def cookie(client: Client) -> bytes:
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def handshake(
    client: Client | None,
    *,
    origin: str | None,
    host: str = "127.0.0.1:8000",
    scheme: str = "ws",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[WebsocketCommunicator, bool]:
    headers = [(b"host", host.encode()), *(extra or [])]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if client is not None:
        headers.append((b"cookie", cookie(client)))
    communicator = WebsocketCommunicator(asgi.application, "/ws/dashboard/", headers=headers)
    communicator.scope["scheme"] = scheme  # what daphne sets for ws:// or wss://
    connected, _ = await communicator.connect()
    return communicator, connected


async def accepted(client: Client, **kwargs: Any) -> bool:
    communicator, connected = await handshake(client, **kwargs)
    await communicator.disconnect()
    return connected


async def test_the_sites_own_origin_is_accepted_and_streams() -> None:
    user_id, client = await logged_in("alice")
    communicator, connected = await handshake(client, origin="http://127.0.0.1:8000")
    try:
        assert connected
        await get_channel_layer().group_send(user_group(user_id), {"type": "orders.trade", "order": 1})
        assert (await communicator.receive_json_from(timeout=5))["type"] == "trade"
    finally:
        await communicator.disconnect()


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:1234",  # another port of the same host: another origin
        "http://localhost:1234",
        "http://localhost:8000",  # an allowed host, but not the one the page was served from
        "https://127.0.0.1:8000",  # another scheme
        "http://evil.example",
        "null",
        "file://",
        "http://127.0.0.1:8000@evil.example",
        "http://127.0.0.1:99999",
        "",
    ],
)
async def test_another_origin_is_refused_even_when_logged_in(origin: str) -> None:
    _, client = await logged_in("alice")
    assert not await accepted(client, origin=origin)


async def test_a_handshake_without_an_origin_is_refused() -> None:
    _, client = await logged_in("alice")
    assert not await accepted(client, origin=None)


async def test_a_host_outside_allowed_hosts_is_no_origin_of_ours() -> None:
    # DNS rebinding: evil.test resolved to this server; its pages are not ours.
    _, client = await logged_in("alice")
    assert not await accepted(client, origin="http://evil.test:8000", host="evil.test:8000")


async def test_an_https_only_site_refuses_plain_http_origins_on_its_own_host_and_port(settings) -> None:
    settings.SECURE_SSL_REDIRECT = True
    _, client = await logged_in("alice")
    assert not await accepted(client, origin="http://127.0.0.1:8201", host="127.0.0.1:8201")
    assert not await accepted(client, origin="http://localhost:1234", host="127.0.0.1:8201")
    assert await accepted(client, origin="https://127.0.0.1:8201", host="127.0.0.1:8201")


async def test_a_wss_handshake_is_an_https_origin() -> None:
    _, client = await logged_in("alice")
    assert await accepted(client, origin="https://127.0.0.1:8443", host="127.0.0.1:8443", scheme="wss")
    assert not await accepted(client, origin="http://127.0.0.1:8443", host="127.0.0.1:8443", scheme="wss")


async def test_behind_a_tls_proxy_the_forwarded_scheme_decides(settings) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["trade.example.com"]
    _, client = await logged_in("alice")
    proxied = {"host": "trade.example.com", "extra": [(b"x-forwarded-proto", b"https")]}
    assert await accepted(client, origin="https://trade.example.com", **proxied)
    assert not await accepted(client, origin="http://trade.example.com", **proxied)


async def test_csrf_trusted_origins_are_matched_by_scheme_host_and_port(settings) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.com", "https://admin.example.org:8443"]
    _, client = await logged_in("alice")
    assert await accepted(client, origin="https://app.example.com")
    assert await accepted(client, origin="https://admin.example.org:8443")
    assert not await accepted(client, origin="http://app.example.com")  # scheme
    assert not await accepted(client, origin="https://app.example.com:8443")  # port
    assert not await accepted(client, origin="https://admin.example.org")  # port 443 is not 8443
    assert not await accepted(client, origin="https://evilexample.com")


async def test_a_browser_cannot_join_another_users_groups() -> None:
    alice_id, alice_client = await logged_in("alice")
    bob_id, bob_client = await logged_in("bob")
    bob, connected = await handshake(bob_client, origin="http://127.0.0.1:8000")
    assert connected
    layer = get_channel_layer()
    try:
        # Whatever bob sends, the socket only reads acknowledgements.
        for attempt in [
            {"type": "subscribe", "group": user_group(alice_id)},
            {"type": "websocket.group_add", "group": user_group(alice_id)},
            {"type": "ack", "seq": "x", "group": user_group(alice_id)},
        ]:
            await bob.send_json_to(attempt)
        await layer.group_send(user_group(alice_id), {"type": "orders.trade", "order": "alice-secret"})
        await layer.group_send(user_group(bob_id), {"type": "orders.trade", "order": "bob-own"})
        # Both pushes reach bob's channel in order, if at all: the first he gets is his own.
        assert (await bob.receive_json_from(timeout=5))["order"] == "bob-own"
    finally:
        await bob.disconnect()


async def test_a_strategy_switch_is_pushed_only_to_users_who_trade_it() -> None:
    strategy = await database_sync_to_async(Strategy.objects.create)(
        name="ema-private", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5}
    )
    _, alice_client = await logged_in("alice", strategy=strategy)
    bob_id, bob_client = await logged_in("bob")
    _, staff_client = await logged_in("staffer", staff=True)
    alice, _ = await handshake(alice_client, origin="http://127.0.0.1:8000")
    bob, _ = await handshake(bob_client, origin="http://127.0.0.1:8000")
    try:
        response = await database_sync_to_async(staff_client.post)(
            f"/controls/strategies/{strategy.pk}/", {"enabled": "0", "confirm": "yes", "reason": "test"}
        )
        assert response.status_code < 400, response.content
        change = (await alice.receive_json_from(timeout=5))["change"]
        assert change == {"object": "strategy", "id": strategy.pk, "enabled": False}
        await get_channel_layer().group_send(user_group(bob_id), {"type": "orders.trade", "order": "marker"})
        assert (await bob.receive_json_from(timeout=5))["order"] == "marker"  # nothing about the strategy before it
    finally:
        await alice.disconnect()
        await bob.disconnect()


async def test_after_logout_the_open_socket_is_closed_and_the_cookie_no_longer_connects() -> None:
    _, client = await logged_in("alice")
    old_cookie = cookie(client)
    communicator, connected = await handshake(client, origin="http://127.0.0.1:8000")
    assert connected
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    assert await communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await communicator.disconnect()

    again = WebsocketCommunicator(
        asgi.application,
        "/ws/dashboard/",
        headers=[(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000"), (b"cookie", old_cookie)],
    )
    assert (await again.connect())[0]  # accepted only to be told why
    assert await again.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await again.disconnect()
