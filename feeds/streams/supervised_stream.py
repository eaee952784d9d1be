"""The lifecycle owner of one supervised stream: the one stream class of every venue.

An exchange's stream reads a websocket (streams/feed_streams builds it); a simulated or
replayed feed's reads its local frame source the same way (streams/local_streams),
with the local policy that source needs.

    connect + subscribe (backoff with full jitter, circuit breaker)
      -> recover the gap over REST (checkpoint -> now), delivered in order
      -> live: frames -> parse -> consistency -> fan-out, the heartbeat fed on each frame
      -> connection lost / silent too long / planned redial at max age -> again

The scheduler task checks the heartbeat and, on a timeout, the supervisor reconnects;
a lost connection reaches the supervisor from the read loop. The supervisor's state
guarantees one reconnect at a time. Gap recovery runs with the scheduler paused and
before any live frame of the new connection is read (those wait in the socket), so
recovered trades always come first and the consistency layer drops the overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from websockets.exceptions import ConnectionClosed

from core.health import HealthBoard, Status, worst
from feeds.market import FeedData, MarketData, MarketEvent
from feeds.metrics import (
    FRAMES_MALFORMED,
    STREAM_CONNECT_FAILURES,
    STREAM_CONNECTS,
    STREAM_KNOWN_HOLES,
    STREAM_RECOVERED,
    TICKS_RECEIVED,
)
from feeds.streams.backoff import FullJitterBackoff
from feeds.streams.breaker import CircuitBreaker
from feeds.streams.consistency import TradeRejected
from feeds.streams.gap_recovery import KnownHoleSpan, ns_to_ms
from feeds.streams.socket_session import SocketSession
from feeds.streams.stream_composition import TradeStreamRuntimeComposition
from feeds.streams.supervisor import SupervisorState
from feeds.streams.transport import WebSocketConnection
from feeds.venues.base import ParseError, StreamState, Venue
from feeds.venues.construct import make_trade

log = logging.getLogger(__name__)

HoleSink = Callable[[str, str, int, int, str], Awaitable[None]]
RECOVERED_BATCH = 1000
# Live events are handed on in one FeedData per burst of frames (whatever arrived
# before the read loop next waits), at most this many at a time.
LIVE_BATCH = 512


@dataclass(frozen=True)
class StreamPolicy:
    """Timing and retry policy of a supervised stream; the defaults are production values."""

    heartbeat_timeout_s: float = 60.0
    scheduler_interval_s: float = 1.0
    # Redial before the venue cuts the connection (None: the venue has no age limit).
    max_connection_age_s: float | None = None
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    breaker_threshold: int = 10
    breaker_cooldown_s: float = 60.0
    # Consecutive failed gap recoveries before the gap is recorded as a known hole and
    # live trading resumes without it.
    recovery_attempts: int = 5


class SourceEnded(ConnectionError):
    """A finite frame source (a replayed recording) delivered its last frame: the stream ends."""


class _Outcome(Enum):
    LOST = "lost"
    MAX_AGE = "max_age"
    ENDED = "ended"


@dataclass
class StreamStats:
    frames: int = 0
    trades: int = 0
    recovered: int = 0
    recoveries: int = 0
    recovery_failures: int = 0
    handovers: int = 0
    connects: int = 0
    holes: int = 0
    malformed: Counter[str] = dataclasses.field(default_factory=Counter)
    rejected: int = 0


class SupervisedStream:
    def __init__(
        self,
        *,
        feed: str,
        label: str,
        venue: Venue,
        graph: TradeStreamRuntimeComposition,
        session: SocketSession,
        publish: Callable[[FeedData], None],
        health: HealthBoard,
        symbols: Sequence[str],
        policy: StreamPolicy = StreamPolicy(),
        backoff: FullJitterBackoff | None = None,
        breaker: CircuitBreaker | None = None,
        hole_sink: HoleSink | None = None,
        recovery_enabled: bool = True,
        clock_ns: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.feed = feed
        self.label = label
        self.component = f"feed:{feed}/{label}"
        self._venue = venue
        self._graph = graph
        self._session = session
        self._publish = publish
        self._health = health
        self._symbols = list(symbols)
        self._policy = policy
        self._backoff = backoff or FullJitterBackoff(initial_s=policy.backoff_initial_s, max_s=policy.backoff_max_s)
        self._recovery_backoff = FullJitterBackoff(initial_s=policy.backoff_initial_s, max_s=policy.backoff_max_s)
        self._breaker = breaker or CircuitBreaker(
            failure_threshold=policy.breaker_threshold, cooldown_s=policy.breaker_cooldown_s
        )
        self._hole_sink = hole_sink
        self._recovery_enabled = recovery_enabled
        self._clock_ns = clock_ns
        self._sleep = sleep
        self._stream_state: StreamState = venue.new_stream_state()
        self._last_ts: dict[str, int] = {}
        self._holes: list[KnownHoleSpan] = []
        self._scheduler_task: asyncio.Task[None] | None = None
        self._ticks = TICKS_RECEIVED.labels(venue.name, feed)
        self.stats = StreamStats()
        # Resources to release when the stream ends (the REST session).
        self.closers: list[Callable[[], Awaitable[None]]] = []
        self._pending: list[MarketEvent] = []
        self._burst_open = False
        # When the stream first subscribed (Unix ms): a symbol with no trade yet is
        # recovered from here, so its first trades cannot fall into a reconnect.
        self._first_subscribed_ms: int | None = None

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    def restore_checkpoints(self, checkpoints: dict[str, MarketData]) -> None:
        """Seed the consistency layer from persisted checkpoints (before run)."""
        for symbol in self._symbols:
            trade = checkpoints.get(symbol)
            if trade is not None:
                self._graph.consistency.restore_checkpoint(trade)
                self._last_ts[symbol] = trade.ts_event

    async def run(self) -> None:
        """Stream until cancelled, or until a finite frame source has delivered its last frame."""
        self._report(Status.DEGRADED, "connecting")
        try:
            await self._establish()
            while True:
                await self._stop_scheduler()
                if not await self._recover():
                    await self._sleep(self._recovery_backoff.next_delay())
                    await self._drop_current()
                    await self._after_loss(None)
                    continue
                self._graph.supervisor.notify_activity()
                self._start_scheduler()
                self._report_streaming()
                connection = self._session.current
                outcome = await self._pump(connection)
                if outcome is _Outcome.ENDED:
                    return
                if outcome is _Outcome.MAX_AGE:
                    await self._handover(connection)
                else:
                    await self._after_loss(connection)
        finally:
            self._flush_pending()
            self._graph.supervisor.stop()
            await self._stop_scheduler()
            await self._session.close()
            for close in self.closers:
                with contextlib.suppress(Exception):
                    await close()

    # --- connecting ------------------------------------------------------------------

    async def _establish(self) -> None:
        """Connect and subscribe, retrying with jittered backoff behind the breaker."""
        supervisor = self._graph.supervisor
        while True:
            # Trades from here on are the stream's to deliver, checkpoint or not.
            attempt_started_ms = ns_to_ms(self._clock_ns())
            if not self._breaker.allow_attempt():
                status, reason = self._breaker.health()
                self._report(status, reason)
                await self._sleep(max(self._breaker.retry_after_s(), 0.001))
                continue
            try:
                state = supervisor.state
                if state is SupervisorState.STOPPED:
                    await self._graph.reconnect.reconnect()
                    supervisor.start()
                elif state is SupervisorState.FAILED:
                    await supervisor.retry()
                elif state is SupervisorState.RECONNECTING:
                    await supervisor.wait_settled()
                    if self._connected():
                        break
                    continue
                elif not await supervisor.handle_connection_lost():
                    continue
            except Exception as exc:
                STREAM_CONNECT_FAILURES.labels(self.feed).inc()
                self._breaker.record_failure(f"{type(exc).__name__}: {exc}")
                delay = self._backoff.next_delay()
                status, reason = self._breaker.health()
                self._report(status, reason)
                log.info("feed %s: redial in %.2fs after %s", self.component, delay, exc)
                await self._sleep(delay)
                continue
            break
        self.stats.connects += 1
        STREAM_CONNECTS.labels(self.feed).inc()
        self._breaker.record_success()
        self._backoff.reset()
        if self._first_subscribed_ms is None:
            self._first_subscribed_ms = attempt_started_ms

    def _connected(self) -> bool:
        current = self._session.current
        return self._graph.supervisor.state is SupervisorState.RUNNING and current is not None and not current.closed

    async def _after_loss(self, connection: WebSocketConnection | None) -> None:
        state = await self._graph.supervisor.wait_settled()
        if state is SupervisorState.RUNNING and self._session.current is not connection and self._connected():
            # The scheduler's heartbeat reconnect already replaced the socket.
            self.stats.connects += 1
            return
        self._report(Status.DEGRADED, "reconnecting")
        await self._establish()

    async def _handover(self, connection: WebSocketConnection | None) -> None:
        """Planned redial at max age: the new socket is subscribed before the old one closes."""
        # No heartbeat reconnect may race the handover for the socket.
        await self._stop_scheduler()
        try:
            await self._session.handover()
            self.stats.handovers += 1
        except Exception as exc:
            log.warning("feed %s: planned redial failed (%s); redialling", self.component, exc)
            await self._drop_current()
            await self._after_loss(connection)

    async def _drop_current(self) -> None:
        current = self._session.current
        if current is not None:
            with contextlib.suppress(Exception):
                await current.close()

    # --- the scheduler task ----------------------------------------------------------

    def _start_scheduler(self) -> None:
        self._scheduler_task = asyncio.create_task(self._graph.scheduler.start(), name=f"{self.component}:heartbeat")

    async def _stop_scheduler(self) -> None:
        self._graph.scheduler.stop()
        task, self._scheduler_task = self._scheduler_task, None
        if task is None:
            return
        if not task.done():
            task.cancel()
        # A failed heartbeat reconnect shows as supervisor FAILED; the error itself was
        # already counted there, so only its retrieval is left.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    # --- gap recovery ----------------------------------------------------------------

    async def _recover(self) -> bool:
        """Fill [checkpoint, now] of every symbol; False when it failed and should be retried."""
        if not self._recovery_enabled:
            return True
        end_ms = ns_to_ms(self._clock_ns())
        coordinator = self._graph.recovery_coordinator
        try:
            for symbol in self._symbols:
                result = await coordinator.recover(symbol, end_ms, start_if_no_checkpoint=self._first_subscribed_ms)
                self.stats.recovered += len(result.recovered_trades)
                STREAM_RECOVERED.labels(self.feed).inc(len(result.recovered_trades))
                if result.hole is not None:
                    await self._record_hole(result.hole, "older than the venue's trade history")
        except Exception as exc:
            self.stats.recovery_failures += 1
            failures = self._recovery_backoff.attempt + 1
            log.warning("feed %s: gap recovery failed (%d): %s", self.component, failures, exc)
            if failures < self._policy.recovery_attempts:
                self._report(Status.DEGRADED, f"gap recovery failed, retrying: {exc}")
                return False
            await self._skip_unrecoverable(end_ms, f"gap recovery failed {failures} times: {exc}")
        self.stats.recoveries += 1
        self._recovery_backoff.reset()
        return True

    async def _skip_unrecoverable(self, end_ms: int, reason: str) -> None:
        """Give up on the gap: record it as a known hole per symbol, then go live."""
        for symbol in self._symbols:
            state = self._graph.state_store.get(symbol)
            if state is not None and state.last_trade is not None:
                start_ms = ns_to_ms(state.last_trade.ts_event)
                if start_ms < end_ms:
                    await self._record_hole(KnownHoleSpan(symbol, start_ms, end_ms), reason)

    async def _record_hole(self, hole: KnownHoleSpan, reason: str) -> None:
        self._holes.append(hole)
        self.stats.holes += 1
        STREAM_KNOWN_HOLES.labels(self.feed).inc()
        log.error(
            "feed %s: known hole in %s from %d to %d ms: %s",
            self.component,
            hole.symbol,
            hole.start_time,
            hole.end_time,
            reason,
        )
        if self._hole_sink is not None:
            await self._hole_sink(
                self.feed, hole.symbol, hole.start_time * 1_000_000, hole.end_time * 1_000_000, reason
            )

    def deliver_recovered(self, trades: Sequence[MarketData]) -> None:
        """The recovery controller's sink: accepted recovered trades, in order."""
        self._flush_pending()  # live events of the previous connection go first
        for start in range(0, len(trades), RECOVERED_BATCH):
            chunk = [self._with_duration(trade) for trade in trades[start : start + RECOVERED_BATCH]]
            self._ticks.inc(len(chunk))
            self._publish(FeedData(self.feed, tuple(chunk)))

    # --- live ------------------------------------------------------------------------

    async def _pump(self, connection: WebSocketConnection | None) -> _Outcome:
        """Read and deliver frames until the connection ends or reaches its planned age."""
        if connection is None or connection.closed:
            return _Outcome.LOST
        on_frame = self.on_frame
        max_age = self._policy.max_connection_age_s
        deadline = connection.opened_at + max_age if max_age else None
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    on_frame(await connection.recv())
        except ConnectionClosed:
            return _Outcome.LOST
        except SourceEnded:
            return _Outcome.ENDED
        except TimeoutError:
            return _Outcome.MAX_AGE if self._session.current is connection else _Outcome.LOST

    def on_frame(self, frame: bytes) -> None:
        """Parse one frame and deliver what the consistency layer accepts (never awaits).

        Every frame is activity for the heartbeat, a malformed one too; it is recorded
        once per burst, with the delivery, when the read loop next waits.
        """
        self.stats.frames += 1
        if not self._burst_open:
            self._burst_open = True
            asyncio.get_running_loop().call_soon(self._end_burst)
        try:
            events = self._venue.parse(frame, self._clock_ns())
        except ParseError as exc:
            self.stats.malformed[exc.reason] += 1
            FRAMES_MALFORMED.labels(self._venue.name, exc.reason).inc()
            return
        if not events:
            return
        events = self._stream_state.apply(events)
        accept = self._graph.consistency.accept
        delivered = self._pending
        for event in events:
            if isinstance(event, MarketData):
                try:
                    if accept(event) is None:
                        continue
                except TradeRejected:
                    self.stats.rejected += 1
                    continue
                event = self._with_duration(event)
                self.stats.trades += 1
            delivered.append(event)
        if len(delivered) >= LIVE_BATCH:
            self._flush_pending()

    def _end_burst(self) -> None:
        # Runs when the read loop next waits for the socket: one heartbeat update and
        # one batch per burst of frames rather than per frame.
        self._burst_open = False
        self._graph.supervisor.notify_activity()
        self._flush_pending()

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        self._ticks.inc(len(batch))
        self._publish(FeedData(self.feed, tuple(batch)))

    def _with_duration(self, trade: MarketData) -> MarketData:
        previous = self._last_ts.get(trade.symbol)
        self._last_ts[trade.symbol] = trade.ts_event
        # A duration the venue state already set stands: Upstox's day boundary resets it
        # to 0, and the time since yesterday's last trade would be wrong there.
        if previous is None or trade.duration_since_last_ns is not None:
            return trade
        # The fast constructor, not dataclasses.replace: this runs for every tick.
        return make_trade(
            trade.symbol,
            trade.price,
            trade.volume,
            trade.ts_event,
            trade.ts_recv,
            trade.trade_id,
            trade.side,
            trade.ts_event - previous,
            trade.cumulative_volume,
        )

    # --- health ----------------------------------------------------------------------

    def _report_streaming(self) -> None:
        if self._holes:
            hole = self._holes[-1]
            self._report(
                Status.DEGRADED,
                f"streaming; {len(self._holes)} known hole(s), last in {hole.symbol} "
                f"from {hole.start_time} to {hole.end_time} ms",
            )
        else:
            self._report(Status.HEALTHY, "streaming")

    def _report(self, status: Status, reason: str) -> None:
        self._health.set(self.component, status, reason)
        prefix = f"feed:{self.feed}/"
        parts = {name: health for name, health in self._health.snapshot().items() if name.startswith(prefix)}
        feed_status = worst([health.status for health in parts.values()])
        reasons = [
            f"{name[len(prefix) :]}: {h.reason}" for name, h in sorted(parts.items()) if h.status is not Status.HEALTHY
        ]
        self._health.set(f"feed:{self.feed}", feed_status, "; ".join(reasons) or "streaming")
