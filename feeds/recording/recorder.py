"""The tick recorder: a feed fan-out consumer that persists every MarketData in batches.

`consume` never awaits: it converts events to rows into a bounded buffer. A flush
task writes the buffer when it reaches `batch_size` or every `flush_interval_s`,
through a PipelinedWriter (COPY in a writer process on PostgreSQL). A full buffer drops the
batch and counts it (overflow), health says so; a failed write keeps its rows and is
retried after `retry_delay_s`. A row the database refuses (a value out of its range) is
refused alone, with a count, a named reason, a log line and a known hole at its time
(feeds.models.KnownHole), and the rest of its batch is written: one bad row never
stalls the recorder. A tick already recorded (the same instrument and trade id, as
when a standby takes a feed over) is skipped by the writer and counted as a duplicate.
`close()` drains what is left, so a clean shutdown loses nothing.

A recorder may be fenced: `may_write()` is asked before every write, and while it says
no (the process no longer holds its feed's lease, so a standby may be recording the
same trades) nothing is written; what is buffered is the new holder's to recover.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from core.health import HealthBoard, Status
from feeds.market import FeedData, MarketData, Side
from feeds.metrics import (
    RECORDER_DUPLICATES,
    RECORDER_OVERFLOW,
    RECORDER_REFUSED,
    RECORDER_WRITE_FAILURES,
    RECORDER_WRITTEN,
)
from feeds.recording.tick_address import TickAddress
from feeds.recording.tick_refusals import Refusal
from feeds.recording.tick_rows import CheckpointRow, TickRow
from feeds.recording.tick_writer import PipelinedWriter, RunSync, TickWriter, as_pipelined, run_in_db_thread

log = logging.getLogger(__name__)


@dataclass
class RecorderStats:
    recorded: int = 0  # ticks committed to the database
    duplicates: int = 0  # ticks skipped as already recorded (same instrument and trade id)
    fenced: int = 0  # writes not made because the process no longer held its lease
    overflow: int = 0  # ticks dropped because the buffer was full
    unknown_symbol: int = 0  # ticks of a symbol with no instrument row
    flushes: int = 0
    write_failures: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # ticks the database refused, by reason


# Refused rows logged one by one per batch; past this many, one line says how many more.
REFUSALS_LOGGED_PER_BATCH = 10
_INT8_MAX = 2**63 - 1

# (feed name, venue symbol, start ns, end ns, reason): where a refused tick is written down.
HoleSink = Callable[[str, str, int, int, str], Awaitable[object]]


async def record_hole_in_database(feed: str, venue_symbol: str, start_ns: int, end_ns: int, reason: str) -> object:
    from channels.db import database_sync_to_async

    from feeds.recording.checkpoint_store import record_known_hole

    return await database_sync_to_async(record_known_hole)(feed, venue_symbol, start_ns, end_ns, reason)


# Enum.value is a descriptor call; a dict lookup is cheaper on the per-tick path.
_SIDE_TEXT: dict[Side | None, str] = {Side.BUY: "buy", Side.SELL: "sell", None: ""}


@dataclass
class _Pending:
    rows: list[TickRow] = field(default_factory=list)
    # The last trade per (feed id, venue symbol): the checkpoint this batch advances to.
    last: dict[tuple[int, str], MarketData] = field(default_factory=dict)

    def checkpoints(self) -> list[CheckpointRow]:
        return [
            CheckpointRow(
                feed_id,
                symbol,
                t.trade_id or "",
                t.ts_event,
                t.price,
                t.volume,
                t.side.value if t.side is not None else "",
            )
            for (feed_id, symbol), t in self.last.items()
        ]


class TickRecorder:
    """Buffers ticks from the fan-out and writes them in batches."""

    def __init__(
        self,
        writer: TickWriter | PipelinedWriter,
        instruments: Mapping[tuple[str, str], TickAddress],
        *,
        batch_size: int = 5000,
        flush_interval_s: float = 0.5,
        capacity: int = 200_000,
        retry_delay_s: float = 1.0,
        health: HealthBoard | None = None,
        component: str = "recorder",
        run_sync: RunSync = run_in_db_thread,
        clock: Callable[[], float] = time.monotonic,
        hole_sink: HoleSink = record_hole_in_database,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        if batch_size < 1 or capacity < batch_size:
            raise ValueError("need 1 <= batch_size <= capacity")
        self._writer = as_pipelined(writer, run_sync)
        self._instruments = dict(instruments)
        self._names = {key.instrument_id: names for names, key in self._instruments.items()}
        self._hole_sink = hole_sink
        self._may_write = may_write
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._capacity = capacity
        self._retry_delay_s = retry_delay_s
        self._health = health
        self._component = component
        self._clock = clock
        self._current = _Pending()
        self._sealed: deque[_Pending] = deque()  # batches waiting for (or failing) their write
        # Writes submitted for the first len(_inflight) sealed batches, same order. They
        # outlive a cancelled flush, so the next flush settles them before resubmitting.
        self._inflight: deque[asyncio.Future[Sequence[Refusal] | None]] = deque()
        self._buffered = 0
        self._wake = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._last_overflow_log = float("-inf")
        self.stats = RecorderStats()

    @property
    def buffered(self) -> int:
        """Ticks accepted but not yet committed."""
        return self._buffered

    async def consume(self, batch: FeedData) -> None:
        """Buffer `batch` without waiting (the fan-out consumer)."""
        self.offer(batch)

    def offer(self, batch: FeedData) -> None:
        """Buffer `batch`; when the buffer cannot take all of it, drop it whole and count it."""
        if self._buffered + len(batch.events) > self._capacity:
            self.stats.overflow += len(batch.events)
            RECORDER_OVERFLOW.inc(len(batch.events))
            self._report(Status.DEGRADED, f"buffer full: {self.stats.overflow} ticks dropped")
            now = self._clock()
            if now - self._last_overflow_log >= 10.0:
                self._last_overflow_log = now
                log.warning(
                    "recorder: buffer full (%d ticks), %d ticks dropped so far", self._buffered, self.stats.overflow
                )
            return
        rows, last = self._current.rows, self._current.last
        feed = batch.feed
        instruments = self._instruments
        added = 0
        for event in batch.events:
            if type(event) is not MarketData:  # marks, quotes and funding are not ticks
                continue
            key = instruments.get((feed, event.symbol))
            if key is None:
                self.stats.unknown_symbol += 1
                continue
            rows.append(
                (
                    key.instrument_id,
                    event.ts_event,
                    event.ts_recv,
                    event.price,
                    event.volume,
                    event.duration_since_last_ns,
                    event.trade_id or "",
                    _SIDE_TEXT[event.side],
                )
            )
            last[(key.feed_id, event.symbol)] = event
            added += 1
        self._buffered += added
        if len(rows) >= self._batch_size:
            self._seal()
            self._wake.set()

    def _seal(self) -> None:
        if self._current.rows:
            self._sealed.append(self._current)
            self._current = _Pending()

    async def run(self) -> None:
        """Flush by size or interval until cancelled."""
        while True:
            # asyncio.timeout rather than wait_for, which on 3.11 can swallow a cancellation.
            try:
                async with asyncio.timeout(self._flush_interval_s):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            self._seal()
            if not await self.flush():
                await asyncio.sleep(self._retry_delay_s)

    async def flush(self) -> bool:
        """Write every sealed batch in order; return False when a write failed (rows kept).

        Every sealed batch is submitted at once (the writer pipelines them) and they are
        settled oldest first, each popped only once committed.
        """
        async with self._write_lock:
            if self._sealed and self._may_write is not None and not self._may_write():
                self.stats.fenced += 1
                self._report(Status.BLOCKED, f"not writing: lease lost, {self._buffered} ticks left to the new holder")
                return False
            while self._sealed:
                while len(self._inflight) < len(self._sealed):
                    batch = self._sealed[len(self._inflight)]
                    self._inflight.append(self._writer.submit(batch.rows, batch.checkpoints()))
                pending, written = self._sealed[0], self._inflight[0]
                try:
                    # Shielded: a cancelled flush leaves the write to finish; the next settles it.
                    refused = await asyncio.shield(written)
                except Exception as exc:  # the database may come back: keep the rows, retry later
                    await self._settle_after_failure()
                    self.stats.write_failures += 1
                    RECORDER_WRITE_FAILURES.inc()
                    self._report(Status.DEGRADED, f"write failed, retrying: {exc}")
                    log.warning("recorder: write of %d ticks failed: %s", len(pending.rows), exc)
                    return False
                self._inflight.popleft()
                self._sealed.popleft()
                self._buffered -= len(pending.rows)
                duplicates = getattr(refused, "duplicates", 0)
                if duplicates:
                    self.stats.duplicates += duplicates
                    RECORDER_DUPLICATES.inc(duplicates)
                written_count = len(pending.rows) - (len(refused) if refused else 0) - duplicates
                self.stats.recorded += written_count
                RECORDER_WRITTEN.inc(written_count)
                self.stats.flushes += 1
                if refused:
                    await self._account_refused(pending.rows, refused)
            if not self.stats.overflow:
                self._report_recording()
            return True

    async def _account_refused(self, rows: Sequence[TickRow], refused: Sequence[Refusal]) -> None:
        for number, (index, reason) in enumerate(refused):
            self.stats.refused[reason] += 1
            RECORDER_REFUSED.labels(reason).inc()
            if number < REFUSALS_LOGGED_PER_BATCH:
                log.warning(
                    "recorder: tick refused by the database (%s), the rest of its batch written: %r",
                    reason,
                    rows[index],
                )
        if len(refused) > REFUSALS_LOGGED_PER_BATCH:
            log.warning("recorder: %d more ticks of the batch refused", len(refused) - REFUSALS_LOGGED_PER_BATCH)
        await self._record_holes(rows, refused)

    async def _record_holes(self, rows: Sequence[TickRow], refused: Sequence[Refusal]) -> None:
        """Write each refused tick down as a known hole at its time: the gap stays visible.

        The exchange time bounds the hole when the column can hold it; when the exchange
        time itself was the refused value, the receive time stands in.
        """
        for index, reason in refused:
            instrument_id, ts_event, ts_recv = rows[index][0], rows[index][1], rows[index][2]
            names = self._names.get(instrument_id)
            if names is None:
                continue  # no such instrument here (the refusal was a missing one): nothing to name
            at = ts_event if 0 <= ts_event <= _INT8_MAX else ts_recv
            try:
                await self._hole_sink(*names, at, at, f"tick refused by the database ({reason})")
            except Exception as exc:  # the log line above is the record then
                log.warning("recorder: could not record the refused tick as a known hole: %s", exc)

    def _report_recording(self) -> None:
        if self.stats.refused:
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.stats.refused.items()))
            total = sum(self.stats.refused.values())
            self._report(Status.DEGRADED, f"recording; {total} ticks refused by the database ({reasons})")
        else:
            self._report(Status.HEALTHY, "recording")

    async def _settle_after_failure(self) -> None:
        # The later writes fail unwritten (WriteSkipped) once one failed; wait for them
        # all, then let the writer accept batches again for the retry.
        if self._inflight:
            # asyncio.wait, not gather: a cancelled flush must not cancel the writes.
            await asyncio.wait(self._inflight)
        for written in self._inflight:
            if not written.cancelled():
                written.exception()  # retrieved: the failure is reported once, by flush
        self._inflight.clear()
        self._writer.reset()

    async def close(self) -> None:
        """Write everything buffered (shutdown path); one retry on failure, then report the loss."""
        self._seal()
        if self._may_write is not None and not self._may_write():
            log.warning("recorder: lease lost; %d buffered ticks left to the feed's new holder", self._buffered)
        elif not await self.flush() and not await self.flush():
            lost = self._buffered
            log.error("recorder: %d ticks could not be written at shutdown", lost)
            self._report(Status.BLOCKED, f"{lost} ticks not written at shutdown")
        await self._writer.close()

    def _report(self, status: Status, reason: str) -> None:
        if self._health is not None:
            self._health.set(self._component, status, reason)
