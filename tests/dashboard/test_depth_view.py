"""The depth view and its API route: login, which instruments have a book, exact levels, stale books."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from feeds.distribution import order_books
from feeds.distribution.order_books import order_book_key
from feeds.distribution.redispub.envelope import Envelope, encode
from feeds.models import Feed, Instrument, MarketType, Subscription

LEVELS = {"bids": [["96712.4", "0.015"], ["96712.3", "1.2"]], "asks": [["96712.5", "0.000000000001"]], "sequence": 42}


def _instrument(*, channel: str = "order_book", enabled: bool = True, name: str = "tab") -> Instrument:
    feed = Feed.objects.create(name=name, venue="tabdeal", market_type=MarketType.PERPETUAL, enabled=enabled)
    instrument = Instrument.objects.create(
        feed=feed, symbol="BTC_USDT", venue_symbol="BTC_USDT", tick_size=Decimal("0.1"), lot_size=Decimal("0.001")
    )
    Subscription.objects.create(instrument=instrument, channel=channel)
    return instrument


def _envelope(source: str = "WS", status: str = "HEALTHY", **data: object) -> bytes:
    return encode(
        Envelope(
            venue="tabdeal",
            market_type="perpetual",
            symbol="BTC_USDT",
            venue_symbol="BTC_USDT",
            channel="order_book",
            publish_seq=7,
            instance_id="abc123",
            recv_time_ns=1_732_924_800_500_000_000,
            exchange_time_ns=1_732_924_800_123_000_000,
            source=source,
            status=status,
            data={**LEVELS, **data},
        )
    )


@pytest.fixture
def client_in(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_user("viewer", password="pw-long-enough-123"))
    return client


@pytest.fixture
def namespaced(settings) -> None:  # type: ignore[no-untyped-def]
    # A prefix of its own, so this test's key meets nothing else on the shared Redis.
    settings.MARKET_DATA_PREFIX = f"t{uuid.uuid4().hex[:10]}"


@pytest.mark.django_db
def test_anonymous_callers_are_sent_to_login_or_refused() -> None:
    instrument = _instrument()
    anonymous = Client()
    assert anonymous.get(f"/markets/{instrument.pk}/depth/").status_code == 302
    assert anonymous.get("/markets/depth/").status_code == 302
    assert anonymous.get(f"/api/order-books/{instrument.pk}/").status_code == 401


def test_an_instrument_whose_book_is_not_streamed_is_not_found(client_in: Client) -> None:
    trades_only = _instrument(channel="trades", name="tab-trades")
    disabled = _instrument(enabled=False, name="tab-off")
    for instrument in (trades_only, disabled):
        assert client_in.get(f"/markets/{instrument.pk}/depth/").status_code == 404
        assert client_in.get(f"/api/order-books/{instrument.pk}/").status_code == 404
    assert client_in.get("/api/order-books/999999/").status_code == 404
    listing = client_in.get("/markets/depth/").content.decode()
    assert f"/markets/{trades_only.pk}/depth/" not in listing


def test_without_redis_the_book_is_stale_and_says_why(client_in: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.REDIS_URL = ""
    instrument = _instrument()
    body = client_in.get(f"/api/order-books/{instrument.pk}/").json()
    assert body["fresh"] is False and body["bids"] == [] and body["asks"] == []
    assert "REDIS_URL is not set" in body["reason"]
    assert (body["venue"], body["symbol"], body["venue_symbol"]) == ("tabdeal", "BTC_USDT", "BTC_USDT")
    page = client_in.get(f"/markets/{instrument.pk}/depth/").content.decode()
    assert "stale" in page and "REDIS_URL is not set" in page
    assert f"/markets/{instrument.pk}/depth/" in client_in.get("/markets/depth/").content.decode()


@pytest.mark.needs_redis
def test_the_api_and_the_page_show_the_published_levels_exactly(client_in: Client, namespaced: None) -> None:
    instrument = _instrument()
    key = order_book_key(instrument)
    assert key == f"{settings.MARKET_DATA_PREFIX}{_namespace()}:tabdeal:perpetual:BTC_USDT:order_book"
    store = redis.Redis.from_url(settings.REDIS_URL)
    try:
        store.set(key, _envelope(), px=5000)
        body = client_in.get(f"/api/order-books/{instrument.pk}/").json()
        assert body["fresh"] is True and body["reason"] == ""
        assert (body["bids"], body["asks"], body["sequence"]) == (LEVELS["bids"], LEVELS["asks"], 42)
        assert (body["source"], body["status"], body["publish_seq"]) == ("WS", "HEALTHY", 7)
        assert body["exchange_time_ns"] == 1_732_924_800_123_000_000
        page = client_in.get(f"/markets/{instrument.pk}/depth/").content.decode()
        assert "96712.4" in page and "0.000000000001" in page and "WS HEALTHY" in page

        store.set(key, _envelope("REST", "DEGRADED"), px=5000)
        assert client_in.get(f"/api/order-books/{instrument.pk}/").json()["source"] == "REST"

        store.set(key, b"not an envelope", px=5000)
        unreadable = client_in.get(f"/api/order-books/{instrument.pk}/").json()
        assert unreadable["fresh"] is False and unreadable["reason"].startswith("unreadable snapshot")

        store.delete(key)  # the TTL ran out: stale, never the old book
        stale = client_in.get(f"/api/order-books/{instrument.pk}/").json()
        assert stale["fresh"] is False and stale["bids"] == [] and "no fresh snapshot" in stale["reason"]
    finally:
        store.delete(key)
        store.close()


def test_an_unreachable_redis_is_a_stale_book_not_an_error(client_in: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    order_books._client.cache_clear()
    instrument = _instrument()
    response = client_in.get(f"/api/order-books/{instrument.pk}/")
    assert response.status_code == 200
    assert response.json()["fresh"] is False and response.json()["reason"].startswith("Redis unreachable")


def _namespace() -> str:
    return f".{settings.REDIS_NAMESPACE}" if settings.REDIS_NAMESPACE else ""
