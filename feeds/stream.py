"""One feed stream: frames from the venue's source, parsed, batched, handed to the fan-out.

Malformed frames are counted per venue and reason and skipped; they never stop the
stream. The stream owns the per-stream state (time of the previous tick per symbol).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from typing import Callable

from feeds.fanout import FeedFanout
from feeds.market import FeedData, MarketData, MarketEvent
from feeds.metrics import FRAMES_MALFORMED, TICKS_RECEIVED
from feeds.venues.base import FeedSpec, ParseError, Venue
from core.health import HealthBoard, Status

log = logging.getLogger(__name__)


class FeedStream:
    def __init__(
        self, feed: FeedSpec, venue: Venue, fanout: FeedFanout, health: HealthBoard,
        *, clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.feed = feed
        self.venue = venue
        self._fanout = fanout
        self._health = health
        self._clock_ns = clock_ns
        self._last_ts: dict[str, int] = {}
        self._venue_state = venue.new_stream_state()
        self.malformed: Counter[str] = Counter()
        self.component = f"feed:{feed.name}"

    async def run(self) -> None:
        """Stream until cancelled."""
        self._health.set(self.component, Status.DEGRADED, "connecting")
        ticks = TICKS_RECEIVED.labels(self.venue.name, self.feed.name)
        async for frames in self.venue.open(self.feed).batches():
            events = self.parse_batch(frames)
            if events:
                ticks.inc(len(events))
                self._fanout.publish(FeedData(self.feed.name, tuple(events)))
            if self._health.get(self.component).status is not Status.HEALTHY:  # type: ignore[union-attr]
                self._health.set(self.component, Status.HEALTHY, "streaming")

    def parse_batch(self, frames: list[bytes]) -> list[MarketEvent]:
        received_ns = self._clock_ns()
        events: list[MarketEvent] = []
        for frame in frames:
            try:
                parsed = self.venue.parse(frame, received_ns)
            except ParseError as exc:
                self.malformed[exc.reason] += 1
                FRAMES_MALFORMED.labels(self.venue.name, exc.reason).inc()
                log.debug("feed %s: skipped malformed frame: %s", self.feed.name, exc)
                continue
            for event in self._venue_state.apply(parsed):
                # Only trades have a previous tick; mark prices and quotes pass through.
                if isinstance(event, MarketData):
                    previous = self._last_ts.get(event.symbol)
                    self._last_ts[event.symbol] = event.ts_event
                    # The venue state may have set it already (0 at an Upstox day boundary).
                    if previous is not None and event.duration_since_last_ns is None:
                        event = dataclasses.replace(event, duration_since_last_ns=event.ts_event - previous)
                events.append(event)
        return events
