"""Read the latest published order book of an instrument, for the depth view and the API.

The feed process publishes each snapshot on its Redis key (`...:order_book`) with a
TTL of a few snapshot periods; the web reads that key and nothing else, so the page,
the API and any other Redis reader see the same book. Freshness is the key's
existence: an absent key is a stale book, shown as such with no levels, never an old
one dressed as current. Levels stay the decimal strings the publisher wrote.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import redis
from django.conf import settings
from django.db.models import QuerySet

from feeds.distribution.redispub.envelope import EnvelopeError, decode
from feeds.distribution.redispub.keys import KeyLayoutError, namespaced_prefix, stream_key
from feeds.models import Instrument

ORDER_BOOK_CHANNEL = "order_book"
READ_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class OrderBookRead:
    """What the web shows of an instrument's book: fresh levels, or why there are none."""

    fresh: bool
    reason: str  # "" when fresh
    key: str
    bids: list[list[str]] = field(default_factory=list)  # [price, size], best first
    asks: list[list[str]] = field(default_factory=list)
    sequence: int | None = None
    source: str | None = None  # WS or REST (the fallback)
    status: str | None = None
    status_reason: str = ""
    exchange_time_ns: int | None = None
    recv_time_ns: int | None = None
    publish_seq: int | None = None
    instance_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "fresh": self.fresh,
            "reason": self.reason,
            "key": self.key,
            "bids": self.bids,
            "asks": self.asks,
            "sequence": self.sequence,
            "source": self.source,
            "status": self.status,
            "status_reason": self.status_reason,
            "exchange_time_ns": self.exchange_time_ns,
            "recv_time_ns": self.recv_time_ns,
            "publish_seq": self.publish_seq,
            "instance_id": self.instance_id,
        }


def order_book_instruments() -> QuerySet[Instrument]:
    """Instruments whose order book is streamed: an enabled feed and an enabled subscription."""
    return (
        Instrument.objects.filter(
            feed__enabled=True, subscriptions__channel=ORDER_BOOK_CHANNEL, subscriptions__enabled=True
        )
        .select_related("feed")
        .distinct()
        .order_by("feed__name", "symbol")
    )


def order_book_key(instrument: Instrument) -> str:
    prefix = namespaced_prefix(settings.MARKET_DATA_PREFIX, settings.REDIS_NAMESPACE)
    feed = instrument.feed
    return stream_key(prefix, feed.venue, feed.market_type, instrument.symbol, ORDER_BOOK_CHANNEL)


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=READ_TIMEOUT_S, socket_connect_timeout=READ_TIMEOUT_S)


def latest_order_book(instrument: Instrument) -> OrderBookRead:
    """Return the instrument's latest published book, or a stale read saying why there is none."""
    try:
        key = order_book_key(instrument)
    except KeyLayoutError as exc:
        return OrderBookRead(False, f"no Redis key for this instrument: {exc}", "")
    if not settings.REDIS_URL:
        return OrderBookRead(False, "order books are published to Redis, and REDIS_URL is not set", key)
    try:
        body: Any = _client(settings.REDIS_URL).get(key)
    except redis.RedisError as exc:
        return OrderBookRead(False, f"Redis unreachable: {type(exc).__name__}", key)
    if body is None:
        return OrderBookRead(False, "no fresh snapshot: nothing published within the key's TTL", key)
    try:
        envelope = decode(body if isinstance(body, bytes) else str(body).encode())
        data = envelope.data
        bids, asks, sequence = data["bids"], data["asks"], data.get("sequence")
    except (EnvelopeError, KeyError, TypeError) as exc:
        return OrderBookRead(False, f"unreadable snapshot: {exc}"[:200], key)
    return OrderBookRead(
        True,
        "",
        key,
        bids=bids,
        asks=asks,
        sequence=sequence,
        source=envelope.source,
        status=envelope.status,
        status_reason=envelope.status_reason,
        exchange_time_ns=envelope.exchange_time_ns,
        recv_time_ns=envelope.recv_time_ns,
        publish_seq=envelope.publish_seq,
        instance_id=envelope.instance_id,
    )
