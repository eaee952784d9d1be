"""The dashboard websocket: anonymous users are refused; logged-in users get live prices."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from dashboard.consumers import CLOSE_UNAUTHENTICATED
from tradingsite.asgi import application
from tradingsite.demo import DEMO_INSTRUMENTS, demo_load
from tradingsite.runtime.compose import build_runtime

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # a browser sends both; the origin must be the host's own


@database_sync_to_async
def session_cookie(username: str = "trader") -> bytes:
    user = get_user_model().objects.create_user(username, password="pw-long-enough-123")
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_anonymous_websocket_is_closed_with_4401() -> None:
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST])
    connected, _ = await communicator.connect()
    assert connected
    closed = await communicator.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await communicator.disconnect()


async def test_foreign_origin_is_rejected_even_when_logged_in() -> None:
    cookie = await session_cookie()
    communicator = WebsocketCommunicator(
        application, "/ws/dashboard/", headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)]
    )
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


async def test_logged_in_websocket_receives_conflated_prices_from_the_running_feed(settings) -> None:
    settings.DASHBOARD_PUSH_INTERVAL_S = 0.05
    await database_sync_to_async(demo_load)(password="pw-long-enough-123")
    cookie = await session_cookie()
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected

    runtime = build_runtime(role="test", feed_names=["sim"], periodic_jobs=False)
    run = asyncio.create_task(runtime.run())
    try:
        latest: dict[str, dict[str, object]] = {}
        while len(latest) < len(DEMO_INSTRUMENTS):
            message = await communicator.receive_json_from(timeout=10)
            assert message["type"] == "prices"
            symbols = [row["symbol"] for row in message["prices"]]
            # Conflated: one row per instrument per push, however many trades happened.
            assert len(symbols) == len(set(symbols))
            latest.update({row["symbol"]: row for row in message["prices"]})
        assert set(latest) == {symbol for symbol, *_ in DEMO_INSTRUMENTS}
        for row in latest.values():
            assert row["feed"] == "sim"
            assert float(row["price"]) > 0 and row["ticks"] >= 1
    finally:
        runtime.request_stop()
        assert await asyncio.wait_for(run, 10) == 0
        await communicator.disconnect()
