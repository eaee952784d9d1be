"""Health per stream and per venue, republished every interval whether or not it changed.

Pub/sub is fire-and-forget, so silence must never mean both "quiet market" and "dead
feed": a reader that stops hearing the `health` channel (or finds its key gone, the TTL
being a few intervals) knows the publisher is gone; a reader that hears HEALTHY while
the trades key is absent knows the market is quiet.

A stream is one instrument of one feed. Its status is the worst of: its metadata
(BLOCKED "metadata unavailable" until the gate opens), the feed's own health on the
process's board, and each of its channels (DEGRADED while on REST or expired with no
REST to fall back on).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from core.health import HealthBoard, Status, worst
from feeds.distribution.redispub.bridge import MarketDataBridge
from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.catalog import Catalog, FeedEntry, InstrumentEntry
from feeds.distribution.redispub.envelope import Envelope, Source
from feeds.distribution.redispub.fallback import FallbackController
from feeds.distribution.redispub.keys import HEALTH_CHANNEL, RATELIMIT_SUBJECT, VENUE_SCOPE, venue_key
from feeds.distribution.redispub.publish_gate import PublishGate
from feeds.distribution.redispub.publisher import Draft, RedisPublisher

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(
        self,
        catalog: Catalog,
        gate: PublishGate,
        publisher: RedisPublisher,
        board: HealthBoard,
        *,
        bridge: MarketDataBridge,
        fallback: FallbackController | None,
        interval_s: float,
        sleep: Callable[[float], Any] = asyncio.sleep,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._catalog = catalog
        self._gate = gate
        self._publisher = publisher
        self._board = board
        self._bridge = bridge
        self._fallback = fallback
        self._interval_s = interval_s
        self._sleep = sleep
        self._clock_ns = clock_ns
        self._ttl_ms = round(interval_s * catalog.cadence.multiplier * 1000)
        self._skipped_seen: dict[str, int] = {}

    async def run(self) -> None:
        while True:
            reraise_if_cancelling()
            try:
                await self._publisher.publish(self.drafts())
            except RedisError:
                reraise_if_cancelling()
                # Logged (throttled) and shown on the component by the publisher's link
                # health; this loop is what probes Redis every interval while it is down.
            await self._sleep(self._interval_s)

    def drafts(self) -> list[Draft]:
        """Return one health message per stream and one per venue."""
        now = self._clock_ns()
        channels = self._channels_by_stream()
        drafts: list[Draft] = []
        for venue, feeds in sorted(self._catalog.venues().items()):
            statuses: list[Status] = []
            counts = {status.value: 0 for status in Status}
            feed_states = {}
            for feed in feeds:
                feed_health = self._board.get(f"feed:{feed.name}")
                feed_states[feed.name] = feed_health.status.value if feed_health else "UNKNOWN"
                for instrument in feed.instruments.values():
                    status, reason, data = self._stream_health(feed, instrument, channels, now)
                    statuses.append(status)
                    counts[status.value] += 1
                    drafts.append(
                        Draft(
                            self._catalog.key(feed, instrument, HEALTH_CHANNEL),
                            self._ttl_ms,
                            Envelope(
                                venue=venue,
                                market_type=feed.market_type,
                                symbol=instrument.symbol,
                                venue_symbol=instrument.venue_symbol,
                                channel=HEALTH_CHANNEL,
                                recv_time_ns=now,
                                source=Source.INTERNAL.value,
                                status=status.value,
                                status_reason=reason,
                                data=data,
                            ),
                        )
                    )
            venue_status = worst(statuses)
            drafts.append(
                Draft(
                    venue_key(self._catalog.prefix, venue, HEALTH_CHANNEL),
                    self._ttl_ms,
                    Envelope(
                        venue=venue,
                        market_type=VENUE_SCOPE,
                        symbol=None,
                        venue_symbol=None,
                        channel=HEALTH_CHANNEL,
                        recv_time_ns=now,
                        source=Source.INTERNAL.value,
                        status=venue_status.value,
                        status_reason=""
                        if venue_status is Status.HEALTHY
                        else f"{len(statuses) - counts['HEALTHY']} of {len(statuses)} streams not healthy",
                        data={"streams": counts, "feeds": feed_states, "interval_ms": round(self._interval_s * 1000)},
                    ),
                )
            )
            if self._fallback is not None:
                drafts.append(self._ratelimit_draft(venue, now))
        return drafts

    def _ratelimit_draft(self, venue: str, now: int) -> Draft:
        """Return the venue's REST budget use: DEGRADED while polls are being skipped."""
        fallback = self._fallback
        assert fallback is not None
        skipped = fallback.skipped_polls[venue]
        skipping = skipped > self._skipped_seen.get(venue, 0)
        self._skipped_seen[venue] = skipped
        return Draft(
            venue_key(self._catalog.prefix, venue, RATELIMIT_SUBJECT),
            self._ttl_ms,
            Envelope(
                venue=venue,
                market_type=VENUE_SCOPE,
                symbol=None,
                venue_symbol=None,
                channel=RATELIMIT_SUBJECT,
                recv_time_ns=now,
                source=Source.INTERNAL.value,
                status=(Status.DEGRADED if skipping else Status.HEALTHY).value,
                status_reason="REST budget exhausted: fallback polls skipped" if skipping else "",
                data={
                    "rest_per_minute": format(fallback.rest_per_minute, "g"),
                    "rest_calls": fallback.rest_calls[venue],
                    "skipped_polls": skipped,
                    "keys_on_rest": sum(
                        1 for key in fallback.active if fallback.known[key].feed in self._venue_feeds(venue)
                    ),
                },
            ),
        )

    def _venue_feeds(self, venue: str) -> set[str]:
        return {feed.name for feed in self._catalog.venues().get(venue, [])}

    def _channels_by_stream(self) -> dict[tuple[str, str], dict[str, str]]:
        """Return {(feed, venue symbol): {channel: key}} for every websocket key seen."""
        channels: dict[tuple[str, str], dict[str, str]] = {}
        if self._fallback is not None:
            for key, ref in self._fallback.known.items():
                channels.setdefault((ref.feed, ref.venue_symbol), {})[ref.channel] = key
        return channels

    def _stream_health(
        self,
        feed: FeedEntry,
        instrument: InstrumentEntry,
        channels: dict[tuple[str, str], dict[str, str]],
        now: int,
    ) -> tuple[Status, str, dict[str, Any]]:
        data: dict[str, Any] = {"feed": feed.name, "metadata": self._gate.allows(feed.name, instrument.venue_symbol)}
        if not data["metadata"]:
            reason = self._gate.blocked_reason.get(feed.name, "waiting for the first fetch")
            return Status.BLOCKED, f"metadata unavailable: {reason}"[:300], data
        statuses, reasons = [Status.HEALTHY], []
        feed_health = self._board.get(f"feed:{feed.name}")
        if feed_health is not None and feed_health.status is not Status.HEALTHY:
            statuses.append(feed_health.status)
            reasons.append(f"feed {feed_health.status.value.lower()}: {feed_health.reason}")
        channel_states: dict[str, Any] = {}
        for channel, key in sorted(channels.get((feed.name, instrument.venue_symbol), {}).items()):
            last = self._bridge.last_ws_publish_ns.get(key)
            state: dict[str, Any] = {"source": Source.WS.value}
            if last is not None:
                state["ws_age_ms"] = max(0, (now - last) // 1_000_000)
            fallback = self._fallback
            if fallback is not None and key in fallback.active:
                state["source"] = Source.REST.value
                statuses.append(Status.DEGRADED)
                problem = fallback.problems.get(key)
                reasons.append(f"{channel} on REST" + (f" ({problem})" if problem else ""))
            elif fallback is not None and key in fallback.unavailable:
                state["source"] = "NONE"
                statuses.append(Status.DEGRADED)
                reasons.append(f"{channel} expired: {fallback.unavailable[key]}")
            channel_states[channel] = state
        data["channels"] = channel_states
        return worst(statuses), "; ".join(reasons)[:300], data
