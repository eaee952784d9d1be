"""The fan-out consumer: feed batches in, one pipelined round trip of envelopes out.

Events for instruments this process does not publish, or whose metadata has not
landed (the gate), are counted and skipped. A Redis failure loses that batch (the
sequence numbers are spent, so readers see the gap) and is counted; the publisher's
link health (link_health) logs it and says BLOCKED or DEGRADED until a round trip
succeeds again. It never stops the feed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Protocol

from redis.exceptions import RedisError

from core.health import HealthBoard, Status
from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.catalog import Catalog
from feeds.distribution.redispub.envelope import CHANNEL_OF_KIND, Envelope, Source, event_data
from feeds.distribution.redispub.link_health import HEALTH_COMPONENT
from feeds.distribution.redispub.publish_gate import PublishGate
from feeds.distribution.redispub.publisher import Draft, RedisPublisher
from feeds.market import FeedData

log = logging.getLogger(__name__)

__all__ = ["HEALTH_COMPONENT", "MarketDataBridge", "WebsocketArrivals"]


class WebsocketArrivals(Protocol):
    """Told of every key a websocket value was published on (the fallback hands back)."""

    def websocket_published(self, key: str, feed: str, venue_symbol: str, channel: str) -> None: ...


class MarketDataBridge:
    def __init__(
        self,
        catalog: Catalog,
        gate: PublishGate,
        publisher: RedisPublisher,
        health: HealthBoard,
        *,
        arrivals: WebsocketArrivals | None = None,
    ) -> None:
        self._catalog = catalog
        self._gate = gate
        self._publisher = publisher
        self._health = health
        self._arrivals = arrivals
        self.skipped: Counter[str] = Counter()  # reason -> events
        self.last_ws_publish_ns: dict[str, int] = {}  # key -> publish time, for health

    async def consume(self, batch: FeedData) -> None:
        feed = self._catalog.feeds.get(batch.feed)
        if feed is None:
            self.skipped["unknown_feed"] += len(batch.events)
            return
        drafts: list[Draft] = []
        published: list[tuple[str, str, str]] = []
        for event in batch.events:
            instrument = feed.instruments.get(event.symbol)
            if instrument is None:
                self.skipped["unknown_instrument"] += 1
                continue
            if not self._gate.allows(feed.name, event.symbol):
                self.skipped["metadata_gate"] += 1
                self._gate.held_back[feed.name] += 1
                continue
            channel = CHANNEL_OF_KIND[event.kind]
            key = self._catalog.key(feed, instrument, channel)
            drafts.append(
                Draft(
                    key,
                    self._catalog.ttl_ms(feed, channel),
                    Envelope(
                        venue=feed.venue,
                        market_type=feed.market_type,
                        symbol=instrument.symbol,
                        venue_symbol=event.symbol,
                        channel=channel,
                        recv_time_ns=event.ts_recv,
                        exchange_time_ns=event.ts_event,
                        source=Source.WS.value,
                        status=Status.HEALTHY.value,
                        data=event_data(event),
                    ),
                )
            )
            published.append((key, event.symbol, channel))
        if not drafts:
            return
        try:
            await self._publisher.publish(drafts)
        except RedisError:
            reraise_if_cancelling()
            self.skipped["redis_error"] += len(drafts)
            return
        reraise_if_cancelling()  # the fan-out's drain loop would otherwise wait on forever
        now = time.time_ns()
        for key, venue_symbol, channel in published:
            self.last_ws_publish_ns[key] = now
            if self._arrivals is not None:
                self._arrivals.websocket_published(key, feed.name, venue_symbol, channel)
