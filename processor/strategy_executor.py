"""StrategyExecutor: one strategy, one StrategyExecution per instrument.

Constructed stopped. The processor subscribes to its outputs and signals, then calls
`start()`, which launches the router (strategy mailbox -> instrument mailboxes) and
creates the executions for the wanted instruments. The executor owns no route state: it
reports instrument mailbox overflow (and execution failure) through `on_route_overflow`
and confirmed instrument route changes through `on_instrument_route_added/removed`.
An instrument that is no longer wanted but still holds a position is retained until
the strategy's own managed exit flattens it, or until `hand_over` gives the position
to the executor of the same strategy's new parameters, which then manages that exit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from feeds.market import MarketData
from processor.backfill_source import HistoricalTickProvider
from processor.execution import ExecutionSubscriber, StrategyExecution
from processor.held import HeldPositionLookup, nothing_held
from processor.mailbox import MAILBOX_CAPACITY, Mailbox, MailboxClosed
from processor.outputs import OutputBatch, StrategyOutput
from processor.signals import Position, Signal
from processor.specs import FeedSymbol, StrategyChunk, StrategySpec
from processor.strategies import strategy_class

log = logging.getLogger(__name__)


# What the feed router offers a strategy mailbox per feed batch: the batch's chunk of
# every instrument this strategy is routed on, in the batch's order.
StrategyDelivery = Sequence[StrategyChunk]


class MailboxOverflow(Exception):
    """An instrument mailbox was full."""


@dataclass(frozen=True)
class ExecutorSubscriber:
    outputs: Callable[[OutputBatch], None]
    signals: Callable[[Sequence[Signal], Sequence[StrategyOutput]], None]
    output_failed: Callable[[BaseException], None]


@dataclass
class InstrumentRoute:
    mailbox: Mailbox[Sequence[MarketData]]
    execution: StrategyExecution


class StrategyExecutor:
    def __init__(
        self,
        *,
        spec: StrategySpec,
        strategy_mailbox: Mailbox[StrategyDelivery],
        history: HistoricalTickProvider,
        on_route_overflow: Callable[[FeedSymbol, BaseException], None],
        on_instrument_route_added: Callable[[FeedSymbol], None],
        on_instrument_route_removed: Callable[[FeedSymbol], None],
        backfill_default_ns: int = 0,
        mailbox_capacity: int = MAILBOX_CAPACITY,
        clock_ns: Callable[[], int] = time.time_ns,
        held_position: HeldPositionLookup = nothing_held,
        handed_over: dict[FeedSymbol, Position] | None = None,
        last_routed: Callable[[FeedSymbol], MarketData | None] = lambda instrument: None,
    ) -> None:
        self.spec = spec
        self._mailbox = strategy_mailbox
        self._history = history
        self._on_route_overflow = on_route_overflow
        self._on_added = on_instrument_route_added
        self._on_removed = on_instrument_route_removed
        self._backfill_ns = strategy_class(spec.kind).backfill_window_ns(spec.params, backfill_default_ns)
        self._mailbox_capacity = mailbox_capacity
        self._clock_ns = clock_ns
        self._held_position = held_position
        self._last_routed = last_routed  # the last trade the processor routed on an instrument
        self._handed_over = dict(handed_over or {})  # consumed by the first execution of each instrument
        self._routes: dict[FeedSymbol, InstrumentRoute] = {}
        self._wanted: frozenset[FeedSymbol] = frozenset()
        self._subscriber: ExecutorSubscriber | None = None
        self._router: asyncio.Task[None] | None = None
        self._flat_waiters: list[asyncio.Future[None]] = []
        self.cancelled = False
        self.unrouted_ticks = 0

    # -- the processor's side -------------------------------------------------------

    def subscribe(self, subscriber: ExecutorSubscriber) -> None:
        if self._router is not None:
            raise RuntimeError("subscribe before start: emissions would be lost")
        self._subscriber = subscriber

    def start(self) -> None:
        if self._subscriber is None:
            raise RuntimeError("start without a subscriber: emissions would be lost")
        if self._router is not None or self.cancelled:
            raise RuntimeError("executor already started or cancelled")
        self._router = asyncio.create_task(self._route(), name=f"executor:{self.spec.name}")
        self._reconcile_executions()

    def set_instruments(self, instruments: frozenset[FeedSymbol]) -> None:
        """Want exactly `instruments`; unwanted ones with an open position are retained."""
        self._wanted = instruments
        if self._router is not None and not self.cancelled:
            self._reconcile_executions()

    def current_instrument_ids(self) -> frozenset[FeedSymbol]:
        return frozenset(self._routes)

    def execution(self, instrument: FeedSymbol) -> StrategyExecution | None:
        route = self._routes.get(instrument)
        return route.execution if route else None

    def backlog(self) -> int:
        """Ticks queued in this executor's mailboxes."""
        return self._mailbox.size + sum(route.mailbox.size for route in self._routes.values())

    def has_open_positions(self) -> bool:
        return any(route.execution.has_open_position for route in self._routes.values())

    def hand_over(self, instruments: frozenset[FeedSymbol]) -> dict[FeedSymbol, Position]:
        """Stop the executions on `instruments` that hold a position and return those positions.

        The caller starts the strategy's replacement executor with them, so exactly one
        execution manages each open position. An execution still warming up knows no
        position yet (its replacement asks the ledger) and is not handed over.
        """
        handed: dict[FeedSymbol, Position] = {}
        for instrument in sorted(instruments & self._routes.keys()):
            position = self._routes[instrument].execution.known_position
            if position is not None and position != Position.FLAT:
                handed[instrument] = position
                self._remove_route(instrument)
        if handed:
            self._wake_flat_waiters()
        return handed

    async def wait_flat(self) -> None:
        """Return once no execution holds a position."""
        while self.has_open_positions():
            waiter = asyncio.get_running_loop().create_future()
            self._flat_waiters.append(waiter)
            await waiter

    def cancel(self) -> None:
        self.cancelled = True
        self._mailbox.close()
        if self._router is not None:
            self._router.cancel()
        for route in self._routes.values():
            route.execution.unsubscribe()
            route.execution.cancel()
        self._routes = {}
        self._wake_flat_waiters()

    # -- internals ------------------------------------------------------------------

    async def _route(self) -> None:
        mailbox = self._mailbox
        while True:
            try:
                deliveries = await mailbox.take()
            except MailboxClosed:
                return
            self._deliver(deliveries[0] if len(deliveries) == 1 else _merged(deliveries))

    def _deliver(self, delivery: StrategyDelivery) -> None:
        """Fold each instrument's chunk; a live execution with nothing queued folds it at once."""
        routes = self._routes
        for instrument, chunk in delivery:
            route = routes.get(instrument)
            if route is None:
                # Routed before the processor saw this instrument's removal; nothing to run it.
                self.unrouted_ticks += len(chunk)
                continue
            execution = route.execution
            mailbox = route.mailbox
            if execution.folding and not mailbox.size:
                # The fast path: no mailbox round trip for an execution that is keeping up.
                try:
                    execution.fold_ticks(chunk)
                except Exception as exc:  # fails this execution (its route degrades); the next chunk goes on
                    execution.fail(exc)
            elif mailbox.offer(chunk, len(chunk)):
                execution.pump()  # catches its own failures
            else:
                self._on_route_overflow(
                    instrument, MailboxOverflow(f"instrument mailbox full ({mailbox.capacity} ticks)")
                )

    def _reconcile_executions(self) -> None:
        for instrument in sorted(self._wanted - self._routes.keys()):
            self._add_route(instrument)
        for instrument in sorted(self._routes.keys() - self._wanted):
            if not self._routes[instrument].execution.has_open_position:
                self._remove_route(instrument)

    def _add_route(self, instrument: FeedSymbol) -> None:
        mailbox: Mailbox[Sequence[MarketData]] = Mailbox(self._mailbox_capacity)
        execution = StrategyExecution(
            spec=self.spec,
            instrument=instrument,
            logic=strategy_class(self.spec.kind)(self.spec.params),
            mailbox=mailbox,
            history=self._history,
            backfill_window_ns=self._backfill_ns,
            clock_ns=self._clock_ns,
            held_position=self._held_position,
            handed_over=self._handed_over.pop(instrument, None),
            # Created in the same step as the snapshot that routes it: what was routed
            # on the instrument until now is the backfill's to hold.
            routed_before=self._last_routed(instrument),
        )
        # The bridge attaches before start, so the first output already has somewhere to go.
        # It hands the executor subscriber's own callables down: one call per batch, not two.
        assert self._subscriber is not None
        execution.subscribe(
            ExecutionSubscriber(
                outputs=self._subscriber.outputs,
                signals=self._subscriber.signals,
                output_failed=self._subscriber.output_failed,
                position_changed=self._position_changed,
                failed=self._execution_failed,
            )
        )
        execution.start()
        self._routes[instrument] = InstrumentRoute(mailbox, execution)
        self._on_added(instrument)

    def _remove_route(self, instrument: FeedSymbol) -> None:
        route = self._routes.pop(instrument)
        route.execution.unsubscribe()  # the bridge goes first, then the execution
        route.execution.cancel()
        self._on_removed(instrument)

    def _position_changed(self, execution: StrategyExecution) -> None:
        instrument = execution.instrument
        if (
            instrument not in self._wanted
            and not execution.has_open_position
            and self._routes.get(instrument, None) is not None
            and self._routes[instrument].execution is execution
        ):
            self._remove_route(instrument)
        self._wake_flat_waiters()

    def _execution_failed(self, execution: StrategyExecution, exc: BaseException) -> None:
        self._on_route_overflow(execution.instrument, exc)

    def _wake_flat_waiters(self) -> None:
        waiters, self._flat_waiters = self._flat_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _merged(deliveries: Sequence[StrategyDelivery]) -> StrategyDelivery:
    """Deliveries queued while the executor was behind, as one: each instrument's ticks in order.

    One fold per instrument for the whole backlog instead of one per feed batch; the
    ticks each execution folds, and so its outputs and signals, are the same.
    """
    merged: dict[FeedSymbol, list[MarketData]] = {}
    for delivery in deliveries:
        for instrument, chunk in delivery:
            ticks = merged.get(instrument)
            if ticks is None:
                merged[instrument] = list(chunk)
            else:
                ticks.extend(chunk)
    return list(merged.items())
