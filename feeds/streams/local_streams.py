"""Local frame sources (the simulated and replay venues) as supervised streams.

A venue without a socket hands out a frame source; here it sits behind the connection
interface the supervised stream reads, so simulated and replayed frames take the same
parse, stream-state, duration and delivery path as an exchange's. What differs is
policy, not code: no subscribe messages, no gap recovery (nothing is missed between
frames that are generated or read from a recording), no heartbeat redial (a recording
may be silent for as long as the market was, and reopening it would play it again),
and no duplicate filter (a recording is replayed as it was recorded). A finite source
ends the stream when its last frame is delivered.

A venue that can go on after given trades (the simulated one: `ResumableVenue`) is
opened after the persisted checkpoints at first and after the last trades this stream
delivered on every reopen, so its trade ids never restart and never skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol, runtime_checkable

from core.health import HealthBoard
from feeds.market import FeedData, MarketData
from feeds.recording.tick_history import arecorded_ticks
from feeds.streams.consistency import UncheckedTrades
from feeds.streams.runtime_events import LoggingEventPublisher
from feeds.streams.socket_session import SocketSession
from feeds.streams.stream_composition import build_trade_stream_runtime
from feeds.streams.supervised_stream import SourceEnded, StreamPolicy, SupervisedStream
from feeds.venues.base import Endpoint, FeedSpec, FrameSource, LocalVenue, RecordedTicks, WireMessage

LOCAL_LABEL = "source"
LOCAL_POLICY = StreamPolicy(heartbeat_timeout_s=math.inf, max_connection_age_s=None)


class FrameSourceConnection:
    """A frame source read one frame at a time, as a connection's `recv`."""

    def __init__(self, source: FrameSource, endpoint: Endpoint, *, opened_at: float) -> None:
        self.endpoint = endpoint
        self.opened_at = opened_at  # event loop (monotonic) time
        self._batches: AsyncIterator[list[bytes]] = source.batches()
        self._frames: list[bytes] = []
        self._next = 0
        self._closed = False

    async def recv(self) -> bytes:
        """Return the next frame; raise SourceEnded after the last one."""
        if self._next < len(self._frames):
            frame = self._frames[self._next]
            self._next += 1
            return frame
        while True:
            try:
                batch = await anext(self._batches)
            except StopAsyncIteration:
                self._closed = True
                raise SourceEnded(f"{self.endpoint.url}: no more frames") from None
            if batch:
                self._frames, self._next = batch, 1
                return batch[0]

    async def send(self, message: WireMessage) -> None:
        """Nothing to subscribe to: the source already yields only the feed's instruments."""

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        aclose = getattr(self._batches, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


@runtime_checkable
class ResumableVenue(Protocol):
    """A local venue whose source can go on after the last trade of each symbol."""

    def open_after(self, feed: FeedSpec, last: Mapping[str, MarketData]) -> FrameSource: ...


class _NoHistory:
    async def fetch_window(self, window: object, after: object) -> list[MarketData]:
        return []


def build_local_stream(
    spec: FeedSpec,
    venue: LocalVenue,
    *,
    publish: Callable[[FeedData], None],
    health: HealthBoard,
    recorded_ticks: RecordedTicks = arecorded_ticks,
    clock_ns: Callable[[], int] = time.time_ns,
    checkpoints: Mapping[str, MarketData] | None = None,
) -> SupervisedStream:
    """Return the supervised stream of a local venue's feed; `run()` opens its source.

    `checkpoints` (venue symbol -> last recorded trade) is where a resumable venue goes on.
    """
    endpoint = Endpoint(url=f"{venue.name}:{spec.name}", subscribe=())
    # The last trade delivered per symbol: a reopened source goes on after it.
    last: dict[str, MarketData] = dict(checkpoints or {})

    async def endpoint_source() -> Endpoint:
        return endpoint

    async def open_source(endpoint: Endpoint) -> FrameSourceConnection:
        if isinstance(venue, ResumableVenue):
            source = venue.open_after(spec, dict(last))
        else:
            source = venue.open(spec, recorded_ticks=recorded_ticks)
        return FrameSourceConnection(source, endpoint, opened_at=asyncio.get_running_loop().time())

    class NotingLastTrades(UncheckedTrades):
        """Accepts every trade and notes it: a trade accepted is delivered, if only at the
        next flush, so a source reopened before that flush goes on after it."""

        __slots__ = ()

        def accept(self, trade: MarketData) -> MarketData | None:
            last[trade.symbol] = trade
            return trade

    session = SocketSession(endpoint_source, open_source)  # type: ignore[arg-type]
    graph = build_trade_stream_runtime(
        connection=session,
        subscriptions=session,
        publisher=LoggingEventPublisher(f"{spec.name}/{LOCAL_LABEL}"),
        recovery_source=_NoHistory(),
        heartbeat_timeout_s=LOCAL_POLICY.heartbeat_timeout_s,
        scheduler_interval_s=LOCAL_POLICY.scheduler_interval_s,
        consistency=NotingLastTrades if isinstance(venue, ResumableVenue) else UncheckedTrades,
    )
    return SupervisedStream(
        feed=spec.name,
        label=LOCAL_LABEL,
        venue=venue,
        graph=graph,
        session=session,
        publish=publish,
        health=health,
        symbols=[i.venue_symbol for i in spec.instruments],
        policy=LOCAL_POLICY,
        recovery_enabled=False,
        clock_ns=clock_ns,
    )
