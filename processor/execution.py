"""StrategyExecution: one strategy on one instrument.

Constructed stopped. Its subscriber (the executor's bridge) attaches first, then
`start()` backfills from recorded ticks and goes live, folding ticks from the
instrument mailbox and emitting one output per accepted tick and the signals the
strategy derives. Nothing is emitted before a subscriber is attached.

Before going live it adopts the position its strategy already holds on the
instrument: the one handed over by the route it replaces (a parameter change), or
else what the injected lookup says the ledger holds (a restart). A strategy that came
up flat while its accounts hold a position would find nothing to close at its next
exit and have its next entry refused.

Backfill and that lookup are the only awaits an execution has: while they run, live
ticks wait in the bounded instrument mailbox. Once live, the executor calls `pump()`
right after delivering, which folds everything queued synchronously; a task wake-up
per instrument per batch would cost more than folding the tick itself, and folding
is CPU work that would hold the event loop in a task just the same.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from feeds.market import MarketData
from processor.backfill_source import HistoricalTickProvider
from processor.held import HeldPositionLookup, nothing_held
from processor.mailbox import Mailbox
from processor.outputs import OutputBatch, StrategyOutput, output_id
from processor.signals import Position, Signal
from processor.specs import FeedSymbol, StrategySpec
from processor.strategies.base import SignalRow, StrategyLogic

log = logging.getLogger(__name__)


# How long a warm-up waits for the recorded history to reach the trade routed just
# before the execution started (the recorder writes every half second), and how often
# it reads again meanwhile.
BACKFILL_CATCH_UP_S = 10.0
BACKFILL_RETRY_S = 0.1


class BackfillBehind(Exception):
    """The recorded history never reached the last trade routed before the execution started."""


def _holds(ticks: Sequence[MarketData], routed: MarketData) -> bool:
    """Whether backfill `ticks` (in time order) include `routed`, or are past it."""
    ts = routed.ts_event
    if ticks[-1].ts_event != ts:
        return ticks[-1].ts_event > ts
    if not routed.trade_id:
        return True  # no id to tell trades at the same time apart: its time is reached
    for tick in reversed(ticks):
        if tick.ts_event != ts:
            return False
        if tick.trade_id == routed.trade_id:
            return True
    return False


@dataclass(frozen=True)
class ExecutionSubscriber:
    outputs: Callable[[OutputBatch], None]
    signals: Callable[[Sequence[Signal], Sequence[StrategyOutput]], None]
    # `outputs` raised: the route degrades, and the batch's signals are still emitted.
    output_failed: Callable[[BaseException], None]
    position_changed: Callable[[StrategyExecution], None]
    failed: Callable[[StrategyExecution, BaseException], None]


class StrategyExecution:
    def __init__(
        self,
        *,
        spec: StrategySpec,
        instrument: FeedSymbol,
        logic: StrategyLogic,
        mailbox: Mailbox[Sequence[MarketData]],
        history: HistoricalTickProvider,
        backfill_window_ns: int,
        clock_ns: Callable[[], int] = time.time_ns,
        held_position: HeldPositionLookup = nothing_held,
        handed_over: Position | None = None,
        routed_before: MarketData | None = None,
    ) -> None:
        self.spec = spec
        self.instrument = instrument
        self.logic = logic
        self.mailbox = mailbox
        self._history = history
        self._backfill_window_ns = backfill_window_ns
        self._clock_ns = clock_ns
        self._held_position = held_position
        # The position this execution resumes: taken over from the execution it replaces
        # (which wins over the ledger), or looked up before backfill. None while unknown.
        self._resuming: Position | None = handed_over
        # The last trade of this instrument the processor routed before this execution
        # was routed on it: it never reaches the mailbox, so the backfill must hold it.
        self._routed_before = routed_before
        self.execution_id = uuid.uuid4().hex[:16]
        self._subscriber: ExecutionSubscriber | None = None
        self._task: asyncio.Task[None] | None = None
        self.live = False  # backfilled, folding what the executor delivers
        self.folding = False  # live and not failed: the executor may hand it chunks directly
        self._went_live = False
        self._failed = False
        # Whether the logic held a position at the last look (checked when it signals).
        self._open = False
        self._batch_head: tuple[int, str, str, str, str, str, tuple[str, ...]] = (0, "", "", "", "", "", ())
        self._next_seq = 0
        self.backfilled_ticks = 0
        # Live ticks already covered by backfill: older than the boundary, or at it with a known trade id.
        self._boundary_ns: int | None = None
        self._boundary_trade_ids: frozenset[str | None] = frozenset()
        self.skipped_backfilled = 0

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def has_open_position(self) -> bool:
        # A resumed position is held while warming up, before the logic adopts it: removing
        # or degrading the route then must treat it as open.
        resuming = self._resuming
        return self.logic.has_open_position or (resuming is not None and resuming != Position.FLAT)

    @property
    def known_position(self) -> Position | None:
        """The position this execution manages; None while it is still asking the ledger."""
        if self._resuming is not None:
            return self._resuming
        return self.logic.position if self._went_live else None

    def subscribe(self, subscriber: ExecutionSubscriber) -> None:
        if self._task is not None:
            raise RuntimeError("subscribe before start: emissions would be lost")
        self._subscriber = subscriber

    def unsubscribe(self) -> None:
        self._subscriber = None

    def start(self) -> None:
        if self._subscriber is None:
            raise RuntimeError("start without a subscriber: emissions would be lost")
        if self._task is not None:
            raise RuntimeError("execution already started")
        feed, symbol = self.instrument
        self._task = asyncio.create_task(self._run(), name=f"execution:{self.spec.name}:{feed}:{symbol}")

    def cancel(self) -> None:
        self.mailbox.close()
        self.live = self.folding = False
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        try:
            # Looked up first, so the position counts as open during the backfill too.
            if self._resuming is None:
                self._resuming = await self._position_held()
            position = self._resuming
            await self._backfill()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.fail(exc)
            return
        if position != Position.FLAT:
            self.logic.adopt(position)
            log.info("processor %s: resuming %s on %s", self.spec.name, position.name, self.instrument)
        self.live = self._went_live = True
        self._resuming = None
        self._open = self.logic.has_open_position
        spec, (feed, symbol) = self.spec, self.instrument
        self._batch_head = (
            spec.strategy_id,
            spec.name,
            spec.kind,
            feed,
            symbol,
            self.execution_id,
            self.logic.output_names,
        )
        self.folding = True
        if self._subscriber is not None:
            # Once live the executor may drop an unwanted flat instrument, or keep a held one.
            self._subscriber.position_changed(self)
        self.pump()  # what queued while backfilling

    async def _position_held(self) -> Position:
        feed, symbol = self.instrument
        return Position(await self._held_position(self.spec.strategy_id, feed, symbol))

    def pump(self) -> None:
        """Fold everything queued in the mailbox now; a failure degrades this route only."""
        if not self.folding:
            return
        chunks = self.mailbox.take_nowait()
        if not chunks:
            return
        try:
            self.fold(chunks)
        except Exception as exc:
            self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        """Stop folding after `exc` from this execution's fold: its route degrades, siblings go on."""
        self._failed = True
        self.live = self.folding = False
        log.error("processor %s: execution on %s failed: %r", self.spec.name, self.instrument, exc, exc_info=exc)
        subscriber = self._subscriber
        if subscriber is not None:
            subscriber.failed(self, exc)

    async def _backfill(self) -> None:
        feed, symbol = self.instrument
        routed = self._routed_before
        end_ns = self._end_ns()
        ticks = list(await self._history.ticks(feed, symbol, end_ns - self._backfill_window_ns, end_ns))
        # A trade routed just before this execution was (in flight) may not be recorded
        # yet: a history that records this instrument (it returned ticks) is read again
        # from its last tick until it holds that trade, or the route degrades.
        if ticks and routed is not None and not _holds(ticks, routed):
            deadline = time.monotonic() + BACKFILL_CATCH_UP_S
            while not _holds(ticks, routed):
                if time.monotonic() >= deadline:
                    raise BackfillBehind(
                        f"warm-up: recorded ticks of {feed}:{symbol} do not reach the last trade routed before "
                        f"the route started (at {routed.ts_event} ns) after {BACKFILL_CATCH_UP_S:g} s"
                    )
                await asyncio.sleep(BACKFILL_RETRY_S)
                last = ticks[-1].ts_event
                known = {t.trade_id for t in ticks if t.ts_event == last}
                more = await self._history.ticks(feed, symbol, last, self._end_ns())
                ticks += [t for t in more if t.ts_event > last or (t.trade_id is not None and t.trade_id not in known)]
        if not ticks:
            return
        self.logic.warm(ticks)
        self.backfilled_ticks = len(ticks)
        last = ticks[-1].ts_event
        self._boundary_ns = last
        self._boundary_trade_ids = frozenset(t.trade_id for t in ticks if t.ts_event == last)

    def _end_ns(self) -> int:
        """The backfill's end (exclusive): now, or past the last trade routed before this execution."""
        routed = self._routed_before
        now = self._clock_ns()
        return now if routed is None else max(now, routed.ts_event + 1)

    def _drop_backfilled(self, chunk: Sequence[MarketData]) -> Sequence[MarketData]:
        boundary = self._boundary_ns
        assert boundary is not None
        kept = [
            t
            for t in chunk
            if t.ts_event > boundary
            or (t.ts_event == boundary and t.trade_id is not None and t.trade_id not in self._boundary_trade_ids)
        ]
        self.skipped_backfilled += len(chunk) - len(kept)
        if kept and kept[-1].ts_event > boundary:
            self._boundary_ns = None  # past the recorded history: no more overlap possible
        return kept

    def fold(self, chunks: Sequence[Sequence[MarketData]]) -> None:
        """Fold queued chunks as one batch and emit their outputs and signals."""
        if len(chunks) == 1:
            self.fold_ticks(chunks[0])
        else:
            self.fold_ticks([tick for chunk in chunks for tick in chunk])

    def fold_ticks(self, ticks: Sequence[MarketData]) -> None:
        """Fold `ticks` and emit their outputs as one batch, and the signals they caused.

        The hot path: it runs once per strategy, instrument and feed batch, so it does
        only what a batch needs; it raises what the fold raises (the caller fails this
        execution). A kind's position changes with the signals it emits,
        so whether it holds one is looked at only when it signalled.
        """
        if self._boundary_ns is not None:
            ticks = self._drop_backfilled(ticks)
        rows: list[tuple[Any, ...]] = []
        signal_rows: list[SignalRow] = []
        self.logic.fold(ticks, rows, signal_rows)
        subscriber = self._subscriber
        if not rows or subscriber is None:
            return
        first_seq = self._next_seq
        self._next_seq = first_seq + len(rows)
        batch = OutputBatch(*self._batch_head, first_seq, rows)
        try:
            subscriber.outputs(batch)
        except Exception as exc:  # costs nothing until it happens
            subscriber.output_failed(exc)
        if signal_rows:
            self._signal(subscriber, batch, signal_rows)

    def _signal(self, subscriber: ExecutionSubscriber, batch: OutputBatch, signal_rows: list[SignalRow]) -> None:
        spec = self.spec
        emitted_ns = self._clock_ns()
        first_seq = batch.first_seq
        signals = [
            Signal(
                strategy_id=spec.strategy_id,
                strategy_name=spec.name,
                feed=batch.feed,
                symbol=batch.symbol,
                kind=kind,
                price=price,
                emitted_ns=emitted_ns,
                occurrence_ns=ts,
                output_id=output_id(self.execution_id, first_seq + index),
            )
            for index, kind, price, ts in signal_rows
        ]
        subscriber.signals(signals, [batch.output(index) for index, _, _, _ in signal_rows])
        is_open = self.logic.has_open_position
        if is_open != self._open:
            self._open = is_open
            subscriber.position_changed(self)
