"""The Processor: routes feed batches to strategies and owns the routing state.

Four core jobs:
- feed router: takes feed batches in order and offers each instrument's ticks to the
  strategy mailboxes of its routes, never awaiting a mailbox; a full one degrades that
  route through `request_degrade`. A batch the feed fan-out could not queue for the
  processor (its input fell behind) reaches `shed`, which degrades every route the
  batch's trades were for: those strategies would otherwise fold a gapped stream;
- route command loop: the single writer of the routing snapshot (Reconcile, Degrade,
  TeardownStrategy, InstrumentRouteAdded/Removed);
- reconcile loop: polls the repository's enabled strategies on an interval and enqueues
  Reconcile when they changed (no database query per tick);
- fatal watcher: raises FatalError once a degraded route held open positions, so the
  process exits non-zero and restarts from a known state.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from core.log_throttle import FailureLog
from core.runtime.core import FatalError
from feeds.market import FeedData, MarketData
from processor.backfill_source import HistoricalTickProvider, NoHistory
from processor.commands import (
    Degrade,
    InstrumentRouteAdded,
    InstrumentRouteRemoved,
    Reconcile,
    RouteCommand,
    TeardownStrategy,
)
from processor.held import HeldPositionLookup, nothing_held
from processor.mailbox import MAILBOX_CAPACITY, ROUTE_MAILBOX_CAPACITY, Mailbox
from processor.outputs import StrategyOutput
from processor.readiness import Readiness, processor_readiness
from processor.routing import (
    Active,
    Degraded,
    RoutingSnapshot,
    RoutingTurn,
    Stopping,
    StrategyRoute,
    SymbolGroups,
    build_delivery_plan,
    build_instrument_index,
    group_trades,
)
from processor.signals import Position, Signal
from processor.sink import StrategyEventSink
from processor.specs import FeedSymbol, RouteKey, StrategyChunk, StrategySpec
from processor.strategy_executor import ExecutorSubscriber, StrategyDelivery, StrategyExecutor

log = logging.getLogger(__name__)

# A feed batch is routed in slices of at most this many ticks, yielding between
# slices, so one large batch (a gap recovery) cannot fill a 1024-tick mailbox by itself.
MAX_SLICE_TICKS = 256
# How often a stopping route asks the ledger whether its positions still exist.
STOPPING_LEDGER_CHECK_S = 5.0

# The name each route state is counted under (route_state_counts).
ROUTE_STATE_NAMES: dict[type, str] = {Active: "active", Stopping: "stopping", Degraded: "degraded"}

Spawn = Callable[[str, Coroutine[Any, Any, None]], "asyncio.Task[None]"]
LoadDesired = Callable[[], Awaitable[Sequence[StrategySpec]]]


def _slices(batch: FeedData) -> list[tuple[str, Sequence[Any]]]:
    events = batch.events
    if len(events) <= MAX_SLICE_TICKS:
        return [(batch.feed, events)]
    return [(batch.feed, events[start : start + MAX_SLICE_TICKS]) for start in range(0, len(events), MAX_SLICE_TICKS)]


def _create_task(name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    return asyncio.create_task(coro, name=name)


class Processor:
    def __init__(
        self,
        *,
        sink: StrategyEventSink,
        history: HistoricalTickProvider | None = None,
        load_desired: LoadDesired | None = None,
        reconcile_interval_s: float = 1.0,
        backfill_default_ns: int = 0,
        mailbox_capacity: int = MAILBOX_CAPACITY,
        route_mailbox_capacity: int = ROUTE_MAILBOX_CAPACITY,
        clock_ns: Callable[[], int] = time.time_ns,
        on_readiness: Callable[[Readiness], None] | None = None,
        held_position: HeldPositionLookup = nothing_held,
    ) -> None:
        self._sink = sink
        self._held_position = held_position
        self._history = history or NoHistory()
        self._load_desired = load_desired
        self._reconcile_interval_s = reconcile_interval_s
        self._backfill_default_ns = backfill_default_ns
        self._mailbox_capacity = mailbox_capacity
        self._route_mailbox_capacity = route_mailbox_capacity
        # The most ticks routed in one turn from a backlog: half a route's mailbox, and
        # half an instrument's, so a strategy trading every one of them (or one execution
        # still warming up) has room for the next turn while it catches up.
        self._turn_ticks = max(1, route_mailbox_capacity // 2)
        self._turn_instrument_ticks = max(1, mailbox_capacity // 2)
        # Slices of a queued feed batch that did not fit the last turn: the next one starts with them.
        self._held_slices: deque[tuple[str, Sequence[Any]]] = deque()
        # feed -> venue symbol -> the last trade routed (whether a route took it or not):
        # a route added later backfills at least up to it.
        self._last_routed: dict[str, dict[str, MarketData]] = {}
        self._clock_ns = clock_ns
        self._on_readiness = on_readiness
        self.snapshot = RoutingSnapshot()
        # A control queue, not a back-pressure boundary: unbounded by design, and
        # degrade requests are deduplicated so overflow cannot flood it.
        self._commands: asyncio.Queue[RouteCommand] = asyncio.Queue()
        self._pending_degradation: set[int] = set()
        self._route_ids = itertools.count(1)
        self._core: dict[str, asyncio.Task[None]] = {}
        self._fatal: asyncio.Future[str] | None = None
        self.discarded_commands = 0
        # An instrument route change was applied but the instrument index not rebuilt yet.
        self._index_stale = False
        self.shed_batches = 0  # feed batches the fan-out could not queue for the processor
        self.shed_events = 0

    # -- lifecycle ------------------------------------------------------------------

    def start(self, *, spawn: Spawn = _create_task, feed: asyncio.Queue[FeedData] | None = None) -> None:
        """Launch the core jobs; `feed` is this processor's queue on the feed fan-out."""
        if self._core:
            raise RuntimeError("processor already started")
        self._fatal = asyncio.get_running_loop().create_future()
        jobs: dict[str, Coroutine[Any, Any, None]] = {
            "fatal-watcher": self._watch_fatal(),
            "route-commands": self._command_loop(),
        }
        if self._load_desired is not None:
            jobs["reconcile"] = self._reconcile_loop()
        if feed is not None:
            jobs["feed-router"] = self._feed_router(feed)
        for name, coro in jobs.items():
            task = spawn(f"processor:{name}", coro)
            task.add_done_callback(lambda _task: self._report())
            self._core[name] = task
        self._report()

    async def stop(self) -> None:
        """Cancel the core jobs and every route (used by backtests and tests)."""
        for task in self._core.values():
            task.cancel()
        await asyncio.gather(*self._core.values(), return_exceptions=True)
        for route in self.snapshot.routes_by_strategy.values():
            self._close_route(route)
        self.snapshot = RoutingSnapshot(desired=self.snapshot.desired)

    @property
    def fatal(self) -> asyncio.Future[str] | None:
        return self._fatal

    def backlog(self) -> int:
        """Ticks queued in every route's mailboxes, and held by the feed router for its next turn."""
        return sum(len(events) for _, events in self._held_slices) + sum(
            route.executor.backlog()
            for route in self.snapshot.routes_by_strategy.values()
            if not isinstance(route.state, Degraded)
        )

    def route_state_counts(self) -> dict[str, int]:
        """How many routes are in each state: {"active": n, "stopping": n, "degraded": n}."""
        counts = dict.fromkeys(ROUTE_STATE_NAMES.values(), 0)
        for route in self.snapshot.routes_by_strategy.values():
            counts[ROUTE_STATE_NAMES[type(route.state)]] += 1
        return counts

    async def drained(self) -> None:
        """Return once every queued tick has been folded (backtests and tests)."""
        while self.backlog():
            await asyncio.sleep(0)

    def readiness(self) -> Readiness:
        running = {name: not task.done() for name, task in self._core.items()}
        return processor_readiness(
            running,
            self.snapshot.routes_by_strategy.values(),
            shed_batches=self.shed_batches,
            shed_events=self.shed_events,
        )

    def _report(self) -> None:
        if self._on_readiness is not None:
            self._on_readiness(self.readiness())

    # -- commands from outside the loop ---------------------------------------------

    def reconcile(self, desired: Sequence[StrategySpec]) -> None:
        self._commands.put_nowait(Reconcile(tuple(desired)))

    async def settled(self) -> None:
        """Return once every queued route command (and those it caused) has been applied."""
        await self._commands.join()

    def request_degrade(self, key: RouteKey, route_instance_id: int, cause: str) -> None:
        """Enqueue at most one Degrade per route incarnation until the loop handles it."""
        if route_instance_id in self._pending_degradation:
            return
        self._pending_degradation.add(route_instance_id)
        self._commands.put_nowait(Degrade(key, route_instance_id, cause))

    def shed(self, batch: FeedData) -> None:
        """A feed batch the processor's full input queue could not take: degrade whom it concerned.

        Called by the feed fan-out without awaiting. Every route that trades an instrument
        with a trade in the batch has lost ticks, so it degrades (and a route holding a
        position fails the processor fast) rather than trading on a gapped stream.
        """
        self.shed_batches += 1
        self.shed_events += len(batch.events)
        by_symbol = self.snapshot.routes_by_instrument.get(batch.feed)
        if by_symbol:
            symbols = {event.symbol for event in batch.events if isinstance(event, MarketData)}
            cause = f"processor input full: shed a feed batch of {len(batch.events)} events"
            for symbol in sorted(symbols):
                for key, route_instance_id, _mailbox in by_symbol.get(symbol, ()):
                    self.request_degrade(key, route_instance_id, f"{cause} ({batch.feed}:{symbol})")
        self._report()

    # -- feed router (hot path) -----------------------------------------------------

    async def _feed_router(self, feed: asyncio.Queue[FeedData]) -> None:
        pending = self._held_slices
        while True:
            if not pending:
                batch = await feed.get()
                if feed.empty():
                    # Nothing else waiting: routed at once, the strategies run right after it.
                    await self.consume(batch)
                    continue
                pending.extend(_slices(batch))
            # Behind: what queued up is routed as one turn before the strategies run, so
            # each folds an instrument's ticks of many batches in one call (natural
            # batching: the turn is only as large as the backlog). Nothing waits longer
            # for it: the strategies would have run after those batches were routed anyway.
            turn = RoutingTurn(self._turn_ticks, self._turn_instrument_ticks)
            while True:
                if not pending:
                    if feed.empty():
                        break
                    pending.extend(_slices(feed.get_nowait()))
                if not turn.fits(pending[0][1]):
                    break  # the rest waits in `pending` for the next turn, in order
                feed_name, events = pending.popleft()
                turn.add(feed_name, events)
            self.route_turn(turn)
            await asyncio.sleep(0)

    def route_turn(self, turn: RoutingTurn) -> None:
        """Route a turn's trades: one mailbox item per route and feed for the whole turn."""
        for feed, groups in turn.groups.items():
            self._route_groups(feed, groups)

    async def consume(self, batch: FeedData) -> None:
        """Route one feed batch, then yield so strategies run before the next batch."""
        events = batch.events
        if len(events) <= MAX_SLICE_TICKS:
            self.route(batch.feed, events)
        else:
            for start in range(0, len(events), MAX_SLICE_TICKS):
                self.route(batch.feed, events[start : start + MAX_SLICE_TICKS])
                await asyncio.sleep(0)
        # Batches are processed strictly in order; yielding here lets each executor and
        # execution drain its mailbox once per batch, so mailboxes hold about a batch.
        await asyncio.sleep(0)

    def route(self, feed: str, events: Sequence[Any]) -> None:
        """Offer each route the trades in `events` of the instruments it trades, one mailbox item each."""
        groups: SymbolGroups = {}
        group_trades(events, groups)
        self._route_groups(feed, groups)

    def _route_groups(self, feed: str, groups: SymbolGroups) -> None:
        """Offer each route its chunks of `groups` (one feed's trades per symbol) as one item.

        The trades were cut into per-symbol chunks once; every route gets its chunks as one
        item (a delivery), so the cost per route is one offer per turn, not one per
        instrument, and routes that trade the same symbols share one delivery.
        """
        marks = self._last_routed.get(feed)
        if marks is None:
            marks = self._last_routed[feed] = {}
        for symbol, ticks in groups.items():
            marks[symbol] = ticks[-1]
        plan = self.snapshot.deliveries_by_feed.get(feed)
        if not plan or not groups:
            return
        chunks: list[StrategyChunk] = [((feed, symbol), tuple(ticks)) for symbol, ticks in groups.items()]
        total = sum(len(ticks) for ticks in groups.values())
        for symbols, targets in plan:
            if groups.keys() <= symbols:
                delivery, size = chunks, total
            else:
                delivery = [chunk for chunk in chunks if chunk[0][1] in symbols]
                if not delivery:
                    continue
                size = sum(len(ticks) for _, ticks in delivery)
            for key, route_instance_id, mailbox in targets:
                if not mailbox.offer(delivery, size):
                    self.request_degrade(key, route_instance_id, f"strategy mailbox full ({mailbox.capacity} ticks)")

    # -- route command loop (the single writer of the snapshot) ---------------------

    async def _command_loop(self) -> None:
        commands = self._commands
        while True:
            command = await commands.get()
            try:
                self.snapshot = self._apply(self.snapshot, command)
                # A route confirms its instruments one command each (ten thousand for 50
                # strategies on 200 instruments); the index is rebuilt once per run of them,
                # before the loop waits again, not once per command.
                while self._index_stale and not commands.empty():
                    commands.task_done()
                    command = commands.get_nowait()
                    self.snapshot = self._apply(self.snapshot, command)
                if self._index_stale:
                    self.snapshot = self._with_routes(self.snapshot, dict(self.snapshot.routes_by_strategy))
                self._report()
            finally:
                self._commands.task_done()

    def _apply(self, current: RoutingSnapshot, command: RouteCommand) -> RoutingSnapshot:
        if isinstance(command, Reconcile):
            return self._reconcile_routes(current, command.desired)
        if isinstance(command, Degrade):
            return self._degrade_route(current, command)
        if isinstance(command, TeardownStrategy):
            return self._teardown_strategy(current, command)
        if isinstance(command, (InstrumentRouteAdded, InstrumentRouteRemoved)):
            route = current.routes_by_strategy.get(command.key)
            if route is None or route.route_instance_id != command.route_instance_id:
                self.discarded_commands += 1
                return current
            self._index_stale = True
            return current
        raise TypeError(f"unknown route command {command!r}")

    def _reconcile_routes(self, current: RoutingSnapshot, desired: tuple[StrategySpec, ...]) -> RoutingSnapshot:
        wanted = {spec.route_key: spec for spec in desired}
        routes = dict(current.routes_by_strategy)
        # A strategy whose params changed is a new route key for the same strategy id: the
        # new route takes over the old one's open positions on the instruments it trades.
        successors = {spec.strategy_id: spec for spec in desired if spec.route_key not in current.routes_by_strategy}
        handed_over: dict[RouteKey, dict[FeedSymbol, Position]] = {}
        for key, route in current.routes_by_strategy.items():
            spec = wanted.get(key)
            if spec is None:
                if isinstance(route.state, Degraded):
                    del routes[key]  # already closed when it degraded
                    continue
                successor = successors.get(route.spec.strategy_id)
                if successor is not None:
                    route.executor.set_instruments(frozenset())
                    handed = route.executor.hand_over(successor.instruments)
                    if handed:
                        handed_over[successor.route_key] = handed
                        log.info(
                            "processor %s: new params take over the positions on %s",
                            route.spec.name,
                            ", ".join(f"{f}:{s}" for f, s in sorted(handed)),
                        )
                if isinstance(route.state, Stopping):
                    continue
                if route.executor.has_open_positions():
                    route.executor.set_instruments(frozenset())
                    watcher = asyncio.create_task(
                        self._stopping_watcher(key, route.route_instance_id, route.executor),
                        name=f"processor:stopping:{route.spec.name}",
                    )
                    routes[key] = replace(
                        route, state=Stopping(route.executor.current_instrument_ids()), jobs=(*route.jobs, watcher)
                    )
                    log.info("processor %s: removed with open positions; stopping", route.spec.name)
                else:
                    self._close_route(route)
                    del routes[key]
            elif isinstance(route.state, Stopping):
                for job in route.jobs:
                    job.cancel()
                route.executor.set_instruments(spec.instruments)
                routes[key] = replace(route, spec=spec, state=Active(), jobs=())
                log.info("processor %s: re-added before cleanup; active again", spec.name)
            elif isinstance(route.state, Active) and spec != route.spec:
                route.executor.set_instruments(spec.instruments)
                routes[key] = replace(route, spec=spec)
        for key, spec in wanted.items():
            if key not in routes:
                routes[key] = self._add_route(key, spec, handed_over.get(key))
        return self._with_routes(replace(current, desired=desired), routes)

    def _add_route(
        self,
        key: RouteKey,
        spec: StrategySpec,
        handed_over: dict[FeedSymbol, Position] | None = None,
    ) -> StrategyRoute:
        route_instance_id = next(self._route_ids)
        mailbox: Mailbox[StrategyDelivery] = Mailbox(self._route_mailbox_capacity)
        executor = StrategyExecutor(
            spec=spec,
            strategy_mailbox=mailbox,
            history=self._history,
            on_route_overflow=lambda instrument, exc: self.request_degrade(key, route_instance_id, str(exc)),
            on_instrument_route_added=lambda instrument: self._commands.put_nowait(
                InstrumentRouteAdded(key, route_instance_id, instrument)
            ),
            on_instrument_route_removed=lambda instrument: self._commands.put_nowait(
                InstrumentRouteRemoved(key, route_instance_id, instrument)
            ),
            backfill_default_ns=self._backfill_default_ns,
            mailbox_capacity=self._mailbox_capacity,
            clock_ns=self._clock_ns,
            held_position=self._held_position,
            handed_over=handed_over,
            last_routed=self.last_routed,
        )

        # Subscribed before start: the first output of the first execution has a reader.
        # The sink's own method, called once per strategy, instrument and fold; the
        # execution reports a failure of it without a wrapper call per batch.
        def output_failed(exc: BaseException) -> None:
            log.error("processor: output sink failed for %s", spec.name, exc_info=exc)
            self.request_degrade(key, route_instance_id, f"output sink failed: {exc!r}")

        executor.subscribe(
            ExecutorSubscriber(
                outputs=self._sink.outputs,
                signals=functools.partial(self._route_signals, key, route_instance_id),
                output_failed=output_failed,
            )
        )
        executor.start()
        executor.set_instruments(spec.instruments)
        log.info("processor %s: route %d added on %d instruments", spec.name, route_instance_id, len(spec.instruments))
        return StrategyRoute(key, spec, route_instance_id, mailbox, executor, Active())

    def _route_signals(
        self, key: RouteKey, route_instance_id: int, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]
    ) -> None:
        try:
            self._sink.signals(signals, outputs)
        except Exception as exc:
            log.exception("processor: signal sink failed")
            self.request_degrade(key, route_instance_id, f"signal sink failed: {exc!r}")

    async def _stopping_watcher(self, key: RouteKey, route_instance_id: int, executor: StrategyExecutor) -> None:
        """Tear the stopping route down once its executions are flat, or the ledger is.

        The strategy's own exit is one way out; the other is the position closing without
        it (closed by hand, by a stop-loss, at the broker): the execution then believes
        in a position nobody holds, and would keep the route (and the processor's
        DEGRADED) until its crossover happened to want an exit.
        """
        flat = asyncio.ensure_future(executor.wait_flat())
        ledger_flat = False
        try:
            while not flat.done():
                done, _ = await asyncio.wait({flat}, timeout=STOPPING_LEDGER_CHECK_S)
                if not done and await self._ledger_flat(executor):
                    ledger_flat = True
                    break
        finally:
            flat.cancel()
        # Double-check: the wait may end on a cancel or a transient flat moment.
        if ledger_flat or not executor.has_open_positions():
            if ledger_flat:
                log.info(
                    "processor %s: the ledger holds none of its positions; stopping route removed", executor.spec.name
                )
            self._commands.put_nowait(TeardownStrategy(key, route_instance_id))

    async def _ledger_flat(self, executor: StrategyExecutor) -> bool:
        """True when no account holds the position the stopping executions still believe in."""
        if self._held_position is nothing_held:
            return False  # no ledger here (backtests): only the strategy's own exit ends it
        for feed, symbol in sorted(executor.current_instrument_ids()):
            execution = executor.execution((feed, symbol))
            if execution is None or not execution.has_open_position:
                continue
            try:
                if await self._held_position(executor.spec.strategy_id, feed, symbol) != Position.FLAT:
                    return False
            except Exception:  # a failed lookup proves nothing: keep waiting
                log.warning("processor: held-position lookup failed for a stopping route", exc_info=True)
                return False
        return True

    def _degrade_route(self, current: RoutingSnapshot, command: Degrade) -> RoutingSnapshot:
        self._pending_degradation.discard(command.route_instance_id)
        route = current.routes_by_strategy.get(command.key)
        if route is None or route.route_instance_id != command.route_instance_id or isinstance(route.state, Degraded):
            self.discarded_commands += 1  # a stale incarnation, or degraded already
            return current
        has_open = route.executor.has_open_positions()
        self._close_route(route)
        routes = dict(current.routes_by_strategy)
        routes[command.key] = replace(route, state=Degraded(command.cause, self._clock_ns(), has_open), jobs=())
        log.warning("processor %s: route degraded: %s", route.spec.name, command.cause)
        snapshot = self._with_routes(current, routes)
        if has_open:
            self._fail(f"strategy {route.spec.name} degraded with open positions: {command.cause}")
        return snapshot

    def _teardown_strategy(self, current: RoutingSnapshot, command: TeardownStrategy) -> RoutingSnapshot:
        route = current.routes_by_strategy.get(command.key)
        if (
            route is None
            or route.route_instance_id != command.route_instance_id
            or not isinstance(route.state, Stopping)
        ):
            self.discarded_commands += 1
            return current
        self._close_route(route)
        routes = dict(current.routes_by_strategy)
        del routes[command.key]
        log.info("processor %s: positions flat; route removed", route.spec.name)
        return self._with_routes(current, routes)

    def _close_route(self, route: StrategyRoute) -> None:
        self._pending_degradation.discard(route.route_instance_id)
        route.mailbox.close()
        for job in route.jobs:
            job.cancel()
        route.executor.cancel()

    def _with_routes(self, current: RoutingSnapshot, routes: dict[RouteKey, StrategyRoute]) -> RoutingSnapshot:
        self._index_stale = False
        for key, route in routes.items():
            if isinstance(route.state, Stopping):
                retained = route.executor.current_instrument_ids()
                if retained != route.state.retained:
                    routes[key] = replace(route, state=Stopping(retained))
        index = build_instrument_index(routes)
        return RoutingSnapshot(
            desired=current.desired,
            routes_by_instrument=index,
            routes_by_strategy=MappingProxyType(routes),
            deliveries_by_feed=build_delivery_plan(index),
        )

    # -- reconcile loop and fatal watcher -------------------------------------------

    async def _reconcile_loop(self) -> None:
        assert self._load_desired is not None
        last: tuple[StrategySpec, ...] | None = None
        failures = FailureLog(log, "processor: reading the strategy table", interval_s=60.0)
        while True:
            try:
                loaded = await self._load_desired()
            except Exception as exc:
                # A database blip: the routes keep running on the last known set.
                failures.failed(exc)
                await asyncio.sleep(self._reconcile_interval_s)
                continue
            failures.succeeded("reading again")
            desired = tuple(sorted(loaded, key=lambda spec: spec.route_key))
            if desired != last:
                last = desired
                self._commands.put_nowait(Reconcile(desired))
            await asyncio.sleep(self._reconcile_interval_s)

    def _fail(self, reason: str) -> None:
        if self._fatal is not None and not self._fatal.done():
            log.error("processor: failing fast: %s", reason)
            self._fatal.set_result(reason)

    async def _watch_fatal(self) -> None:
        assert self._fatal is not None
        reason = await self._fatal
        raise FatalError(f"processor: {reason}")

    def last_routed(self, instrument: FeedSymbol) -> MarketData | None:
        """The last trade of `instrument` routed so far (to any route, or to none)."""
        feed, symbol = instrument
        marks = self._last_routed.get(feed)
        return None if marks is None else marks.get(symbol)

    def instrument_routes(self) -> dict[str, frozenset[FeedSymbol]]:
        """Strategy name -> instruments it is routed on (for diagnostics and tests)."""
        return {
            route.spec.name: route.executor.current_instrument_ids()
            for route in self.snapshot.routes_by_strategy.values()
            if not isinstance(route.state, Degraded)
        }
