"""The trade executor: signals in, broker orders out, through the ENTRY and EXIT flows.

ENTRY: entry lease on (account, instrument) (row lease, TTL, owner token) -> in one
durable transaction under the ledger lock: re-check the lifecycle (this signal
already handled; any position or entry open on the account and instrument, whatever
the strategy) and reserve capital with the intent -> place at the broker with the
deterministic client order id -> persist the lifecycle in one transaction -> release
the lease. EXIT mirrors it: cancel the position's working entry, size the exit under
the position's row lock, place the closing order, persist; fills realize P&L.

Every signal ends in exactly one recorded outcome per account
(orders.outcomes.signal_outcome_record): placed with its order, or not traded with the
reason. A missing trade setting or a broker failure never reaches the processor.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from core.health import HealthBoard, Status
from orders import lifecycle, selectors
from orders.audit import audit_record
from orders.brokers.base import (
    Broker,
    BrokerOrder,
    BrokerRejected,
    BrokerUnavailable,
    DuplicateClientOrderId,
    OrderNotFound,
    OrderRequest,
)
from orders.brokers.registry import BrokerNotConfigured
from orders.client_ids import client_order_id
from orders.db import in_db_thread
from orders.ledger import InsufficientCapital
from orders.lifecycle import ExitRefusal, IntentSpec
from orders.locks import entry_scope, lock_acquire, lock_release, locks_release_many, new_owner_token
from orders.metrics import BROKER_LATENCY, ENTRIES, EXITS, SIGNAL_TO_ACK_SECONDS
from orders.models import OrderIntent
from orders.models.accounts import Reversal
from orders.models.lifecycle import Intent, OrderSide, OrderType, PositionSide
from orders.models.outcomes import Outcome
from orders.money import entry_reservation, round_to_step
from orders.outcomes import Decision, outcome_counter, signal_outcome_record, signal_outcomes_record_batch
from orders.plans import TradePlan, plans_for_signal, plans_for_signals, signal_key
from orders.resolution import failure_outcome
from orders.sync import order_sync
from processor.signals import Signal, SignalKind

log = logging.getLogger(__name__)

COMPONENT = "orders:executor"
# Of a clean stop's time, what is kept to cancel what is still unfinished and let it
# give its leases back, so the final reconciliation pass can resolve its intents.
STOP_UNWIND_S = 1.0
BrokerFor = Callable[[TradePlan], Broker]
StepHook = Callable[[str], None]


@dataclass(frozen=True)
class ExecutorConfig:
    client_id_prefix: str = "ts"
    lock_ttl_s: float = 30.0
    # A loser of the entry lease waits this long past the TTL before giving up: a holder
    # with the same TTL has released or expired by then, unless it is still renewing.
    lock_wait_margin_s: float = 2.0
    broker_timeout_s: float = 10.0  # below the lock TTL: an entry never outlives its lease
    market_buffer_bps: int = 50
    fee_reserve_bps: int = 10
    max_concurrent: int = 64
    # How long a reversal's entry waits for the exit it follows to fill.
    reversal_wait_s: float = 30.0


POSITION_OF = {
    SignalKind.ENTRY_LONG: PositionSide.LONG,
    SignalKind.EXIT_LONG: PositionSide.LONG,
    SignalKind.ENTRY_SHORT: PositionSide.SHORT,
    SignalKind.EXIT_SHORT: PositionSide.SHORT,
}


def _no_hook(step: str) -> None:
    return None


# Why new entries on an account must not be placed now (a kill switch), or None. Exits
# are never gated: positions must always be able to close. Injected by the wiring, so
# orders does not depend on the app that owns the switches.
EntryGate = Callable[[int], str | None]


def _never_halted(account_id: int) -> str | None:
    return None


# The same question for several accounts at once (one read for a signal's accounts),
# answered per account id; optional beside EntryGate, which it then replaces.
EntryGateMany = Callable[[Sequence[int]], Mapping[int, str | None]]


@dataclass(frozen=True)
class EntryBlocked:
    """Why an entry was not reserved, found under the ledger lock."""

    outcome: Outcome
    reason: str
    # Set when the block is this strategy's own opposite position with its exit working:
    # a reversal, which may wait for that exit to fill.
    reversing_position_id: int | None = None
    reversal: str = Reversal.AFTER_EXIT_FILL


@dataclass
class _Attempt:
    """What one account's flow has done so far, for the record of an unexpected failure."""

    client_order_id: str = ""


@dataclass
class StopReport:
    """What a clean stop left behind: signals whose flow had not finished by the deadline."""

    unfinished: list[str] = field(default_factory=list)
    refused: int = 0

    @property
    def clean(self) -> bool:
        return not self.unfinished


class TradeExecutor:
    """Consumes signals; per account, the signals of one strategy and symbol run in arrival order."""

    def __init__(
        self,
        *,
        broker_for: BrokerFor,
        config: ExecutorConfig,
        health: HealthBoard | None = None,
        step_hook: StepHook = _no_hook,
        entry_gate: EntryGate = _never_halted,
        clock_ns: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        entry_gate_many: EntryGateMany | None = None,
    ) -> None:
        self._broker_for = broker_for
        self.config = config
        self._health = health
        self._step = step_hook
        self._entry_gate = entry_gate
        self._entry_gate_many = entry_gate_many
        self._clock_ns = clock_ns
        self._sleep = sleep
        self._plan_locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._tails: dict[tuple[int, int, str], asyncio.Task[str]] = {}
        self._lease_locks: dict[tuple[int, int], asyncio.Lock] = {}
        self._slots = asyncio.Semaphore(config.max_concurrent)
        self._signals: asyncio.Queue[Signal] | None = None
        self._running: dict[asyncio.Task[None], Signal] = {}
        self._taking = 0  # signals taken off the queue and waiting for a slot
        self._stopping = False
        self.stop_report: StopReport | None = None
        self.outcomes: dict[str, int] = {}

    @property
    def stopping(self) -> bool:
        """True once stop() has begun: new signals are recorded as stopped, not traded."""
        return self._stopping

    # ---- the signal loop --------------------------------------------------------------

    async def run(self, signals: asyncio.Queue[Signal]) -> None:
        """Handle every queued signal until cancelled; after stop(), record new signals as stopped."""
        self._signals = signals
        self._report(Status.HEALTHY, "waiting for signals")
        try:
            while True:
                signal = await signals.get()
                if self._stopping:
                    self._track(self._refuse_stopped(signal), signal)
                    continue
                self._taking += 1
                try:
                    await self._slots.acquire()
                finally:
                    self._taking -= 1
                if self.stop_report is not None:  # the drain ended meanwhile: the final pass may be running
                    self._slots.release()
                    self._track(self._refuse_stopped(signal), signal)
                    continue
                self._dispatch(await self._burst(signals, signal))
        finally:
            for task in list(self._running):
                task.cancel()

    async def _burst(self, signals: asyncio.Queue[Signal], first: Signal) -> list[Signal]:
        """`first` and the signals queued with it, each with its slot taken (only those free at once)."""
        burst = [first]
        while len(burst) < BATCH_MAX and not signals.empty() and not self._slots.locked():
            burst.append(signals.get_nowait())
            # A free slot is taken without yielding: nothing (a stop) runs in between.
            await self._slots.acquire()
        return burst

    def _dispatch(self, burst: list[Signal]) -> None:
        """Start the signals of a burst, each holding its slot.

        Entry signals whose strategy and symbol no other signal of the burst shares are
        handled as one batch (one reserve transaction, one broker call, one lifecycle
        transaction for all their accounts, as one signal's accounts are); every other
        signal runs on its own, in arrival order per strategy and symbol as always.
        """
        keys: dict[tuple[int, str], int] = {}
        for signal in burst:
            key = (signal.strategy_id, signal.symbol)
            keys[key] = keys.get(key, 0) + 1
        batch = [s for s in burst if s.is_entry and keys[(s.strategy_id, s.symbol)] == 1]
        if len(batch) < 2:
            batch = []
        batched = {id(s) for s in batch}
        if batch:
            slots = [_Slot(self._slots) for _ in batch]
            shared = asyncio.ensure_future(self._handle_batch(list(zip(batch, slots))))
            for signal, slot in zip(batch, slots):
                self._track(self._batch_part(shared, signal, slot), signal)
        for signal in burst:
            if id(signal) not in batched:
                self._track(self._handle_guarded(signal, slot_held=True), signal)

    async def _handle_batch(self, batch: list[tuple[Signal, _Slot]]) -> dict[int, list[_Member | asyncio.Task[str]]]:
        """`handle` for several entry signals at once: what each signal's outcome per account is waited on.

        The plan lookups are serialized per strategy and symbol as in `handle` (the locks
        taken in one order); an account and instrument joins the shared group once, and
        any other plan (a second one on the same account and instrument, or one queued
        behind its account's earlier signal) runs its own flow.
        """
        keys = sorted({(signal.strategy_id, signal.symbol) for signal, _ in batch})
        locks = [self._plan_locks.setdefault(key, asyncio.Lock()) for key in keys]
        taken: list[asyncio.Lock] = []
        try:
            for lock in locks:
                await lock.acquire()
                taken.append(lock)
            plans_of = await in_db_thread(plans_for_signals)([signal for signal, _ in batch])
            parts: dict[int, list[_Member | asyncio.Task[str]]] = {}
            members: list[_Member] = []
            pairs: set[tuple[int, int]] = set()
            # Plans that run their own flow start after the group, which so takes its
            # accounts' in-process leases first: an earlier signal wins over a later one.
            deferred: list[tuple[list[_Member | asyncio.Task[str]], Signal, TradePlan]] = []
            for (signal, slot), plans in zip(batch, plans_of):
                mine: list[_Member | asyncio.Task[str]] = []
                if not plans:
                    mine.append(
                        asyncio.ensure_future(
                            self._record(
                                signal,
                                None,
                                Outcome.NO_TRADE_SETTING,
                                "no enabled trade setting (or unknown instrument)",
                                entry=True,
                            )
                        )
                    )
                for plan in plans:
                    previous = self._tails.get((plan.account_id, signal.strategy_id, signal.symbol))
                    pair = (plan.account_id, plan.instrument_id)
                    if (previous is None or previous.done()) and pair not in pairs:
                        pairs.add(pair)
                        member = _Member(plan, signal, slot=slot)
                        members.append(member)
                        mine.append(member)
                    else:
                        deferred.append((mine, signal, plan))
                parts[id(signal)] = mine
            decided: asyncio.Future[None] | None = None
            if members:
                decided = asyncio.get_running_loop().create_future()
                group = self._members_chain(members, decided)
                for member in members:
                    member.group = group
            for mine, signal, plan in deferred:
                mine.append(self._chain(signal, plan))
        finally:
            for lock in taken:
                lock.release()
        if decided is not None:
            await decided  # every member has its outcome now, or the flow it continues on
        return parts

    def _members_chain(self, members: list[_Member], decided: asyncio.Future[None]) -> asyncio.Task[list[str]]:
        """`_group_chain` for the members of several signals."""
        task = asyncio.ensure_future(self._members_guarded(members, decided))
        for member in members:
            key = (member.plan.account_id, member.signal.strategy_id, member.signal.symbol)
            self._tails[key] = task  # type: ignore[assignment]

            def forget(done: asyncio.Task[list[str]], key: tuple[int, int, str] = key) -> None:
                if self._tails.get(key) is done:  # type: ignore[comparison-overlap]  # the tail is this group's task
                    self._tails.pop(key, None)

            task.add_done_callback(forget)
        return task

    async def _batch_part(
        self, shared: asyncio.Task[dict[int, list[_Member | asyncio.Task[str]]]], signal: Signal, slot: _Slot
    ) -> None:
        """One signal of a batch: waits for its own accounts' outcomes, then gives its slot back."""
        _SIGNAL_SLOT.set(slot)
        try:
            try:
                parts = await asyncio.shield(shared)
                for part in parts[id(signal)]:
                    if isinstance(part, _Member):
                        if part.solo is not None:
                            part.outcome = await part.solo
                        assert part.outcome is not None
                    else:
                        await part
            except asyncio.CancelledError:
                # As a cancelled `handle` cancels what it awaits: the batch, this signal's
                # group (which gives its leases back) and its own flows.
                shared.cancel()
                if shared.done() and not shared.cancelled() and shared.exception() is None:
                    for part in shared.result().get(id(signal), []):
                        for task in (part.group, part.solo) if isinstance(part, _Member) else (part,):
                            if task is not None:
                                task.cancel()
                raise
            finally:
                slot.give_back()
        except Exception as exc:  # one failed trade must not stop the executor
            log.exception("orders executor: signal %s failed", signal_key(signal))
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            with contextlib.suppress(Exception):
                await self._record(signal, None, Outcome.FAILED, f"unexpected error: {exc!r}", entry=True)

    def _track(self, coro: Awaitable[None], signal: Signal) -> None:
        task = asyncio.ensure_future(coro)
        self._running[task] = signal
        task.add_done_callback(lambda done: self._running.pop(done, None))

    async def stop(self, timeout_s: float) -> StopReport:
        """Clean stop: take no new signals, finish the queued and in-flight ones within `timeout_s`.

        Signals already queued are traded as usual; a signal arriving afterwards, or
        whose turn comes only after an earlier signal of its account, strategy and
        symbol finished (a backlog would drain one broker round trip at a time), is
        recorded as `stopped` on each account and not traded. A reversal waiting for its
        exit to fill re-checks once and ends (placed, or `stopped`). Whatever is still
        unfinished shortly before the deadline is cancelled (its leases given back, its
        intents left for the final reconciliation pass to resolve), logged and reported
        on health.
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        deadline = end - min(STOP_UNWIND_S, timeout_s * 0.2)
        if self._signals is not None:
            while True:
                try:
                    queued = self._signals.get_nowait()
                except asyncio.QueueEmpty:
                    break
                self._track(self._handle_guarded(queued, slot_held=False), queued)
        self._stopping = True
        while True:
            busy = [task for task in self._running if not task.done()]
            remaining = deadline - loop.time()
            if (not busy and not self._taking) or remaining <= 0:
                break
            if busy:
                await asyncio.wait(busy, timeout=min(remaining, 0.25))
            else:
                await asyncio.sleep(min(remaining, 0.01))
        unfinished = {task: signal for task, signal in self._running.items() if not task.done()}
        report = StopReport(
            unfinished=sorted(signal_key(s) for s in unfinished.values()),
            refused=self.outcomes.get(Outcome.STOPPED, 0),
        )
        self.stop_report = report  # from here on nothing starts, not even a signal that was waiting for a slot
        if unfinished:
            for task in unfinished:
                task.cancel()
            await asyncio.wait(unfinished, timeout=max(end - loop.time(), 0.01))
        if report.clean:
            self._report(
                Status.HEALTHY, f"stopped cleanly; {report.refused} signals after the stop recorded as stopped"
            )
        else:
            log.warning(
                "orders executor: stopped with %d signals unfinished: %s", len(report.unfinished), report.unfinished
            )
            self._report(
                Status.DEGRADED,
                f"stopped with {len(report.unfinished)} signals unfinished (reconciled at the next start): "
                + ", ".join(report.unfinished[:5]),
            )
        return report

    async def _refuse_stopped(self, signal: Signal) -> None:
        try:
            plans = await in_db_thread(plans_for_signal)(signal)
            for account_id in [plan.account_id for plan in plans] or [None]:
                await self._record(
                    signal,
                    account_id,
                    Outcome.STOPPED,
                    "arrived after the runtime began to stop",
                    entry=signal.is_entry,
                )
        except Exception:
            log.exception("orders executor: could not record stopped signal %s", signal_key(signal))

    async def _handle_guarded(self, signal: Signal, *, slot_held: bool) -> None:
        try:
            if not slot_held:
                await self._slots.acquire()
            slot = _Slot(self._slots)
            _SIGNAL_SLOT.set(slot)  # this task's context, copied into the per-account flows
            try:
                await self.handle(signal)
            finally:
                slot.give_back()
        except Exception as exc:  # one failed trade must not stop the executor
            log.exception("orders executor: signal %s failed", signal_key(signal))
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            with contextlib.suppress(Exception):
                await self._record(signal, None, Outcome.FAILED, f"unexpected error: {exc!r}", entry=signal.is_entry)

    async def handle(self, signal: Signal) -> list[str]:
        """Execute one signal on every account set up for its strategy; return the outcome per account.

        The plan lookup is serialized per strategy and symbol, then each account's flow
        is queued behind that account's previous signal of the same strategy and symbol
        (an exit precedes the next entry), so a reversal waiting on one account never
        holds up another. The entry's accounts with nothing queued ahead of them are
        handled together, set-based (`_entry_group`); the others queue as above.
        """
        async with self._plan_locks.setdefault((signal.strategy_id, signal.symbol), asyncio.Lock()):
            plans = await in_db_thread(plans_for_signal)(signal)
            if not plans:
                return [
                    await self._record(
                        signal,
                        None,
                        Outcome.NO_TRADE_SETTING,
                        "no enabled trade setting (or unknown instrument)",
                        entry=signal.is_entry,
                    )
                ]
            grouped: list[TradePlan] = []
            if signal.is_entry:
                accounts: set[int] = set()
                for plan in plans:
                    previous = self._tails.get((plan.account_id, signal.strategy_id, signal.symbol))
                    if (previous is None or previous.done()) and plan.account_id not in accounts:
                        accounts.add(plan.account_id)
                        grouped.append(plan)
            group = self._group_chain(signal, grouped) if grouped else None
            flows = {id(plan): self._chain(signal, plan) for plan in plans if plan not in grouped}
        group_outcomes = dict(zip(map(id, grouped), await group)) if group is not None else {}
        solo_outcomes = dict(zip(flows, await asyncio.gather(*flows.values())))
        return [group_outcomes[id(plan)] if id(plan) in group_outcomes else solo_outcomes[id(plan)] for plan in plans]

    # ---- one account's signal (manual control, risk exits) --------------------------

    async def handle_plan(self, signal: Signal, plan: TradePlan) -> str:
        """Execute `signal` on the one account of `plan` only; return its outcome.

        The same flow as a strategy's signal (lease, ledger, broker, lifecycle, recorded
        outcome), queued behind that account's earlier signals of the strategy and symbol.
        Once the stop began it is recorded as `stopped` and not traded; before, the
        stop's drain waits for it like for a strategy's signal.
        """
        if self._stopping:
            return await self._record(
                signal,
                plan.account_id,
                Outcome.STOPPED,
                "arrived after the runtime began to stop",
                entry=signal.is_entry,
            )
        flow = self._chain(signal, plan)
        self._running[flow] = signal  # type: ignore[index]  # awaited like a tracked signal task
        flow.add_done_callback(lambda done: self._running.pop(done, None))  # type: ignore[arg-type]
        return await flow

    def _group_chain(self, signal: Signal, plans: list[TradePlan]) -> asyncio.Task[list[str]]:
        """Run the group's entry as the tail of each of its accounts: their next signals queue behind it."""
        task = asyncio.ensure_future(self._entry_group_guarded(signal, plans))
        for plan in plans:
            key = (plan.account_id, signal.strategy_id, signal.symbol)
            self._tails[key] = task  # type: ignore[assignment]

            def forget(done: asyncio.Task[list[str]], key: tuple[int, int, str] = key) -> None:
                if self._tails.get(key) is done:  # type: ignore[comparison-overlap]  # the tail is this group's task
                    self._tails.pop(key, None)

            task.add_done_callback(forget)
        return task

    def _chain(self, signal: Signal, plan: TradePlan) -> asyncio.Task[str]:
        key = (plan.account_id, signal.strategy_id, signal.symbol)
        previous = self._tails.get(key)

        async def after_previous() -> str:
            if previous is not None:
                await asyncio.wait({previous})
                if self._stopping:
                    return await self._record(
                        signal,
                        plan.account_id,
                        Outcome.STOPPED,
                        "the runtime began to stop while it waited for an earlier signal",
                        entry=signal.is_entry,
                    )
            return await self._flow_guarded(signal, plan)

        task = asyncio.ensure_future(after_previous())
        self._tails[key] = task
        task.add_done_callback(lambda done: self._tails.pop(key, None) if self._tails.get(key) is done else None)
        return task

    async def _flow_guarded(
        self, signal: Signal, plan: TradePlan, flow: Callable[[_Attempt], Awaitable[str]] | None = None
    ) -> str:
        attempt = _Attempt()
        entry = signal.is_entry
        try:
            if flow is not None:
                return await flow(attempt)
            return await (self._entry if entry else self._exit)(signal, plan, attempt)
        except Exception as exc:
            log.exception("orders executor: signal %s failed on account %s", signal_key(signal), plan.account_id)
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            outcome, reason = await failure_outcome(exc, attempt.client_order_id)
            return await self._record(
                signal, plan.account_id, outcome, reason, client_order_id=attempt.client_order_id, entry=entry
            )

    # ---- entry ------------------------------------------------------------------------

    async def _entry(self, signal: Signal, plan: TradePlan, attempt: _Attempt) -> str:
        cid = client_order_id(
            prefix=self.config.client_id_prefix, account_id=plan.account_id, signal_key=signal_key(signal)
        )
        attempt.client_order_id = cid

        async def decide(outcome: Outcome, reason: str = "") -> str:
            return await self._record(signal, plan.account_id, outcome, reason, client_order_id=cid, entry=True)

        if plan.metadata_missing:
            # Sizes rounded to a guessed lot or tick are not the venue's: no entry on them.
            return await decide(Outcome.NO_METADATA, plan.metadata_missing)
        if plan.quantity <= 0:
            return await decide(Outcome.QUANTITY_ZERO, "quantity rounds to zero at the lot size")
        spec = self._entry_spec(signal, plan, cid)
        try:
            broker = self._broker_for(plan)
        except BrokerNotConfigured as exc:
            self._report(Status.DEGRADED, str(exc))
            return await decide(Outcome.BROKER_NOT_CONFIGURED, str(exc))
        return await self._entry_attempts(signal, plan, spec, broker)

    def _entry_spec(self, signal: Signal, plan: TradePlan, cid: str) -> IntentSpec:
        position_side = POSITION_OF[signal.kind]
        side = OrderSide.BUY if position_side == PositionSide.LONG else OrderSide.SELL
        price = round_to_step(signal.price, plan.tick_size, up=side == OrderSide.SELL)
        return IntentSpec(
            client_order_id=cid,
            account_id=plan.account_id,
            strategy_id=plan.strategy_id,
            instrument_id=plan.instrument_id,
            intent=Intent.ENTRY,
            position_side=position_side,
            side=side,
            order_type=plan.order_type,
            quantity=plan.quantity,
            price=price,
            reserve=entry_reservation(
                plan.quantity,
                price,
                plan.multiplier,
                buffer_bps=self.config.market_buffer_bps if plan.order_type == OrderType.MARKET else 0,
                fee_bps=self.config.fee_reserve_bps,
            ),
            signal_kind=str(signal.kind),
            signal_output_id=signal.output_id,
        )

    async def _entry_attempts(
        self, signal: Signal, plan: TradePlan, spec: IntentSpec, broker: Broker, first: EntryBlocked | None = None
    ) -> str:
        """Reserve and place, or wait once for the exit a reversal follows; `first` is a refusal already decided."""
        cid = spec.client_order_id

        async def decide(outcome: Outcome, reason: str = "") -> str:
            return await self._record(signal, plan.account_id, outcome, reason, client_order_id=cid, entry=True)

        waited = False
        decided: str | EntryBlocked | None = first
        while True:
            if decided is None:
                decided = await self._reserve_and_place(signal, plan, spec, broker)
            if isinstance(decided, str):
                return decided
            # Refused under the lease, which is not held any more: waiting holds nothing.
            if decided.reversing_position_id is None or decided.reversal != Reversal.AFTER_EXIT_FILL:
                return await decide(decided.outcome, decided.reason)
            if waited:
                return await decide(Outcome.EXIT_NOT_FILLED, decided.reason)
            await decide(Outcome.WAITING_FOR_EXIT, decided.reason)
            filled = await self._await_closed(decided.reversing_position_id)
            waited = True
            if not filled:
                if self._stopping:
                    return await decide(Outcome.STOPPED, "the runtime stopped before the exit it reverses filled")
                return await decide(
                    Outcome.EXIT_NOT_FILLED, f"the exit did not fill within {self.config.reversal_wait_s:g}s"
                )
            decided = None

    # ---- entry, set-based across the accounts of one signal -----------------------------

    async def _entry_group_guarded(self, signal: Signal, plans: list[TradePlan]) -> list[str]:
        """The group's outcomes in plan order; an unexpected error records `failed` on every account still open."""
        return await self._members_guarded([_Member(plan, signal) for plan in plans])

    async def _members_guarded(self, members: list[_Member], decided: asyncio.Future[None] | None = None) -> list[str]:
        """`_entry_group_guarded` for members of one or several signals; `decided` is set once the group itself is done."""
        first = members[0].signal
        try:
            await self._entry_group(first, members)
        except Exception as exc:
            log.exception("orders executor: signal %s failed on its entry group", signal_key(first))
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            for member in members:
                if member.outcome is None and member.solo is None:
                    outcome, reason = await failure_outcome(exc, member.cid)
                    member.outcome = await self._record(
                        member.signal, member.plan.account_id, outcome, reason, client_order_id=member.cid, entry=True
                    )
        finally:
            if decided is not None and not decided.done():
                decided.set_result(None)
        outcomes = []
        for member in members:
            if member.solo is not None:
                member.outcome = await member.solo
            assert member.outcome is not None
            outcomes.append(member.outcome)
        return outcomes

    async def _entry_group(self, signal: Signal, members: list[_Member]) -> None:
        """ENTRY for several accounts at once, each with exactly the decision and outcome of `_entry`.

        One transaction takes every lease, locks every ledger, checks every kill switch
        and lifecycle state, reserves on every ledger (one conditional statement) and
        records the intents and every outcome decided so far; the orders go to the
        broker together (one call on the paper exchange); one transaction persists
        every lifecycle with its `placed` outcome and gives the leases back. An account
        that cannot join (its in-process lease busy, its lease held by another owner,
        a reversal that waits) continues on its own flow, and so does every account
        when a group transaction fails: nothing of the group was committed then, or
        (persisting) each lifecycle is retried in its own transaction.
        """
        refusals: list[Decision] = []
        ready: list[_Member] = []
        try:
            for member in members:
                plan = member.plan
                member.cid = client_order_id(
                    prefix=self.config.client_id_prefix,
                    account_id=plan.account_id,
                    signal_key=signal_key(member.signal),
                )
                if plan.metadata_missing:
                    member.refuse(refusals, Outcome.NO_METADATA, plan.metadata_missing)
                    continue
                if plan.quantity <= 0:
                    member.refuse(refusals, Outcome.QUANTITY_ZERO, "quantity rounds to zero at the lot size")
                    continue
                try:
                    member.broker = self._broker_for(plan)
                except BrokerNotConfigured as exc:
                    self._report(Status.DEGRADED, str(exc))
                    member.refuse(refusals, Outcome.BROKER_NOT_CONFIGURED, str(exc))
                    continue
                member.spec = self._entry_spec(member.signal, plan, member.cid)
                local = self._lease_locks.setdefault((plan.account_id, plan.instrument_id), asyncio.Lock())
                if local.locked():
                    self._solo(member.signal, member)
                    continue
                await local.acquire()  # free: taken at once, without yielding
                member.local = local
                member.owner = new_owner_token()
                ready.append(member)
            await self._group_reserve(signal, members, ready, refusals)
        finally:
            for member in members:
                member.give_back_local()

    async def _group_reserve(
        self, signal: Signal, members: list[_Member], ready: list[_Member], refusals: list[Decision]
    ) -> None:
        by_cid = {member.cid: member for member in ready}
        waits: list[tuple[_Member, EntryBlocked]] = []

        def record(batch: lifecycle.EntryBatch) -> None:
            decisions = list(refusals)
            for spec in batch.created:
                decisions.append(Decision(spec.account_id, Outcome.IN_FLIGHT, IN_FLIGHT_REASON, spec.client_order_id))
            for spec, reason in batch.refused:
                assert isinstance(reason, EntryBlocked)
                if reason.reversing_position_id is not None and reason.reversal == Reversal.AFTER_EXIT_FILL:
                    waits.append((by_cid[spec.client_order_id], reason))
                else:
                    decisions.append(Decision(spec.account_id, reason.outcome, reason.reason, spec.client_order_id))
            for spec, exc in batch.insufficient:
                decisions.append(
                    Decision(spec.account_id, Outcome.INSUFFICIENT_CAPITAL, str(exc), spec.client_order_id)
                )
            _outcomes_by_signal(members, decisions)

        def reserve() -> lifecycle.EntryBatch:
            if not ready:
                record(lifecycle.EntryBatch())
                return lifecycle.EntryBatch()
            specs = [member.spec for member in ready if member.spec is not None]
            gate_read = self._gate_read(specs)
            return lifecycle.entry_intents_create(
                specs=specs,
                lease_owners={member.cid: member.owner for member in ready},
                lease_ttl_s=self.config.lock_ttl_s,
                blocked=lambda contenders, states, rows: self._blocked_many(
                    contenders, states, gates=gate_read(rows[0]) if gate_read is not None else None
                ),
                after=record,
                reads=[gate_read.statement] if gate_read is not None else [],
            )

        try:
            batch = await in_db_thread(reserve)()
        except Exception:
            # Nothing of the group was committed: every account runs its own flow.
            log.warning(
                "orders executor: entry group of %s failed; each account on its own", signal_key(signal), exc_info=True
            )
            for member in members:
                member.give_back_local()
                member.outcome = None
                self._solo(member.signal, member)
            return
        for member in members:
            if member.refused is not None:
                member.outcome = self._count(member.refused, entry=True)
        for spec, reason in batch.refused:
            member = by_cid[spec.client_order_id]
            member.give_back_local()
            assert isinstance(reason, EntryBlocked)
            if any(waiting is member for waiting, _ in waits):
                self._solo(member.signal, member, first=reason)
            else:
                member.outcome = self._count(reason.outcome, entry=True)
        for spec, _ in batch.insufficient:
            member = by_cid[spec.client_order_id]
            member.give_back_local()
            member.outcome = self._count(Outcome.INSUFFICIENT_CAPITAL, entry=True)
        for spec in batch.held:
            # Another owner holds the lease: this account waits for it on its own.
            member = by_cid[spec.client_order_id]
            member.give_back_local()
            self._solo(member.signal, member)
        created = [by_cid[spec.client_order_id] for spec in batch.created]
        if not created:
            return
        for member in created:
            member.lease_held = True
        try:
            await self._group_place_and_persist(signal, created)
        finally:
            for member in created:
                member.give_back_local()
            leftover = [member for member in created if member.lease_held]
            if leftover:
                await in_db_thread(locks_release_many)(leases=[member.lease() for member in leftover])
                for member in leftover:
                    member.lease_held = False

    async def _group_place_and_persist(self, signal: Signal, created: list[_Member]) -> None:
        self._step("after_reserve")

        def before_commit(acked: list[tuple[_Member, BrokerOrder]], persisted: list[str]) -> None:
            # The outcomes commit with the orders they name (and the lease releases).
            placed = set(persisted)
            _outcomes_by_signal(
                created,
                [
                    Decision(m.plan.account_id, Outcome.PLACED, f"exchange order {ack.exchange_order_id}", m.cid)
                    for m, ack in acked
                    if m.cid in placed
                ],
            )
            self._step("before_commit")

        def persist(acked: list[tuple[_Member, BrokerOrder]]) -> list[str]:
            def release_leases() -> None:
                locks_release_many(leases=[m.lease() for m, _ in acked], later=True)

            return lifecycle.lifecycle_persist_many(
                orders=[lifecycle.Acknowledged(ack, m.plan.account_id, m.plan.owner_id) for m, ack in acked],
                on_begin=release_leases,
                before_commit=lambda persisted: before_commit(acked, persisted),
            )

        booked = await self._group_book_and_persist(created, persist)
        if booked is None:
            answers = await self._group_place(created)
            self._step("after_place")
            persisted_now: list[str] | BaseException | None = None
        else:
            answers, persisted_now = booked
        acked: list[tuple[_Member, BrokerOrder]] = []
        unplaced = []
        for member, answer in zip(created, answers):
            if isinstance(answer, BrokerOrder):
                acked.append((member, answer))
            else:
                unplaced.append(self._group_unplaced(member.signal, member, answer))
        if unplaced:
            await asyncio.gather(*unplaced)
        if not acked:
            return
        try:
            if isinstance(persisted_now, BaseException):
                raise persisted_now
            persisted = set(persisted_now if persisted_now is not None else await in_db_thread(persist)(acked))
        except Exception:
            # Rolled back as a whole: each lifecycle is persisted in its own transaction.
            log.warning(
                "orders executor: persisting the entry group of %s failed; each account on its own",
                signal_key(signal),
                exc_info=True,
            )
            await asyncio.gather(*(self._group_persist_one(m.signal, m, ack) for m, ack in acked))
            return
        now_ns = self._clock_ns()
        for member, ack in acked:
            member.lease_held = False
            SIGNAL_TO_ACK_SECONDS.observe(max(now_ns - member.signal.emitted_ns, 0) / 1e9)
            if member.cid in persisted:
                member.outcome = self._count(Outcome.PLACED, entry=True)
            else:  # persisted before (adopted by reconciliation meanwhile)
                member.outcome = await self._record(
                    member.signal,
                    member.plan.account_id,
                    Outcome.PLACED,
                    f"exchange order {ack.exchange_order_id}",
                    client_order_id=member.cid,
                    entry=True,
                )
        self._report(Status.HEALTHY, f"last order {acked[-1][0].cid} acknowledged")

    async def _group_book_and_persist(
        self, created: list[_Member], persist: Callable[[list[tuple[_Member, BrokerOrder]]], list[str]]
    ) -> tuple[list[BrokerOrder | BaseException], list[str] | BaseException | None] | None:
        """Book the orders and persist their lifecycles on one database thread, where the broker allows it.

        A broker whose book is this site's database (the paper exchange, `book_on_db_thread`)
        takes the orders in its own statement, committed first (exchange first, as
        always); when it acknowledged every order, their lifecycle transaction follows
        on the same thread: one hand-off instead of two. Returns the answers and what
        persisting returned (the client ids persisted, or the error, or None when it
        was left to the caller because some order was not acknowledged); None when the
        brokers need `_group_place`.
        """
        kinds = {type(member.broker) for member in created}
        if len(kinds) != 1:
            return None
        kind = kinds.pop()
        book_on_db_thread = getattr(kind, "book_on_db_thread", None)
        booked = getattr(kind, "booked", None)
        if not callable(book_on_db_thread) or not callable(booked):
            return None
        for member in created:
            assert member.spec is not None
            member.request = _request(member.spec, member.plan, entry=True)
        items = [(member.broker, member.request) for member in created]
        book = book_on_db_thread(items)
        if book is None:
            return None

        def book_then_persist() -> tuple[list[BrokerOrder | BaseException], list[str] | BaseException | None, float]:
            started = time.monotonic()
            try:
                answers: list[BrokerOrder | BaseException] = list(book())
            except OSError as exc:
                answers = [BrokerUnavailable(f"place {member.cid}: {exc!r}") for member in created]
            except Exception as exc:
                answers = [exc for _ in created]
            elapsed = time.monotonic() - started
            self._step("after_place")
            if not all(isinstance(answer, BrokerOrder) for answer in answers):
                return answers, None, elapsed
            acked = [(member, answer) for member, answer in zip(created, answers) if isinstance(answer, BrokerOrder)]
            try:
                return answers, persist(acked), elapsed
            except Exception as exc:
                return answers, exc, elapsed

        answers, persisted, elapsed = await in_db_thread(book_then_persist)()
        booked(items, answers)
        for member in created:
            _broker_latency(member.broker.name if member.broker else "").observe(elapsed)
        for index, answer in enumerate(answers):
            if isinstance(answer, DuplicateClientOrderId):
                answers[index] = await self._adopt(created[index])
        return answers, persisted

    async def _group_place(self, created: list[_Member]) -> list[BrokerOrder | BaseException]:
        """Send every order; a broker type with `place_batch` (the paper exchange) takes its orders in one call."""
        answers: dict[int, BrokerOrder | BaseException] = {}
        batches: dict[type, list[int]] = {}
        singles = []
        for index, member in enumerate(created):
            assert member.broker is not None and member.spec is not None
            member.request = _request(member.spec, member.plan, entry=True)
            if callable(getattr(type(member.broker), "place_batch", None)):
                batches.setdefault(type(member.broker), []).append(index)
            else:
                singles.append(index)
        started = time.monotonic()

        async def batch(kind: type, indexes: list[int]) -> None:
            items = [(created[i].broker, created[i].request) for i in indexes]
            try:
                results = await asyncio.wait_for(kind.place_batch(items), self.config.broker_timeout_s)  # type: ignore[attr-defined]
            except (TimeoutError, OSError) as exc:
                results = [BrokerUnavailable(f"place {created[i].cid}: {exc!r}") for i in indexes]
            except Exception as exc:
                results = [exc for _ in indexes]
            for i, result in zip(indexes, results):
                if isinstance(result, DuplicateClientOrderId):
                    result = await self._adopt(created[i])
                answers[i] = result

        async def single(i: int) -> None:
            member = created[i]
            assert member.broker is not None and member.request is not None
            try:
                answers[i] = await self._place(member.broker, member.request)
            except Exception as exc:
                answers[i] = exc

        await asyncio.gather(
            *(batch(kind, indexes) for kind, indexes in batches.items()), *(single(i) for i in singles)
        )
        elapsed = time.monotonic() - started
        for member in created:
            _broker_latency(member.broker.name if member.broker else "").observe(elapsed)
        return [answers[i] for i in range(len(created))]

    async def _adopt(self, member: _Member) -> BrokerOrder | BaseException:
        """The client id is at the broker already (our earlier attempt, another process): adopt that order."""
        assert member.broker is not None and member.request is not None
        try:
            return await asyncio.wait_for(
                member.broker.fetch_order(client_order_id=member.cid, symbol=member.request.symbol),
                self.config.broker_timeout_s,
            )
        except (TimeoutError, OSError) as exc:
            return BrokerUnavailable(f"place {member.cid}: {exc!r}")
        except Exception as exc:
            return exc

    async def _group_unplaced(self, signal: Signal, member: _Member, error: BaseException) -> None:
        """An order of the group the broker did not confirm: what `_place_and_persist` does with it."""
        account_id, cid = member.plan.account_id, member.cid
        broker_name = member.broker.name if member.broker else ""
        try:
            if isinstance(error, BrokerRejected):
                await in_db_thread(lifecycle.intent_abandon)(client_order_id=cid, reason=str(error))
                member.outcome = await self._record(
                    signal, account_id, Outcome.BROKER_REJECTED, str(error), client_order_id=cid
                )
            elif isinstance(error, BrokerUnavailable):
                # Unknown outcome: the intent keeps its reservation until its resolution.
                await in_db_thread(lifecycle.intent_mark_unresolved)(client_order_id=cid)
                self._report(Status.DEGRADED, f"broker {broker_name} unavailable: {error}")
                member.outcome = await self._record(
                    signal, account_id, Outcome.UNKNOWN, f"broker {broker_name}: {error}", client_order_id=cid
                )
            else:
                raise error
        except Exception as exc:
            log.exception("orders executor: signal %s failed on account %s", signal_key(signal), account_id)
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            outcome, reason = await failure_outcome(exc, cid)
            member.outcome = await self._record(signal, account_id, outcome, reason, client_order_id=cid)
        finally:
            if member.lease_held:
                await in_db_thread(locks_release_many)(leases=[member.lease()])
                member.lease_held = False

    async def _group_persist_one(self, signal: Signal, member: _Member, ack: BrokerOrder) -> None:
        """One account's lifecycle in its own transaction, after the group's failed."""
        assert member.spec is not None and member.broker is not None
        lease = _Lease(
            member.plan.account_id,
            entry_scope(member.plan.instrument_id),
            member.owner,
            self.config.lock_ttl_s,
            held=True,
        )
        try:
            member.outcome = await self._persist(signal, member.plan, member.spec, ack, entry=True, lease=lease)
        except Exception as exc:
            log.exception("orders executor: signal %s failed on account %s", signal_key(signal), member.plan.account_id)
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
            outcome, reason = await failure_outcome(exc, member.cid)
            member.outcome = await self._record(
                signal, member.plan.account_id, outcome, reason, client_order_id=member.cid
            )
        member.lease_held = lease.held

    def _solo(self, signal: Signal, member: _Member, first: EntryBlocked | None = None) -> None:
        """Continue this account on its own flow (waiting for a lease, a reversal's wait, a group that failed)."""
        plan = member.plan
        # A member of a batch of signals carries its own signal's slot (a reversal's wait gives it back).
        context = contextvars.copy_context()
        if member.slot is not None:
            context.run(_SIGNAL_SLOT.set, member.slot)
        loop = asyncio.get_running_loop()
        if first is None:
            member.solo = loop.create_task(self._flow_guarded(signal, plan), context=context)
            return
        spec, broker = member.spec, member.broker
        assert spec is not None and broker is not None

        async def continued(attempt: _Attempt) -> str:
            attempt.client_order_id = spec.client_order_id
            return await self._entry_attempts(signal, plan, spec, broker, first=first)

        member.solo = loop.create_task(self._flow_guarded(signal, plan, continued), context=context)

    async def _reserve_and_place(
        self, signal: Signal, plan: TradePlan, spec: IntentSpec, broker: Broker
    ) -> str | EntryBlocked:
        """Take the entry lease, re-check and reserve (one transaction), then place and persist; or say why not.

        A lease held by another owner is waited for, with backoff, until it is released
        or expires (lock_acquire takes over an expired lease), for at most the TTL plus
        a margin; the re-check under the lease then refuses a signal the winner already
        handled. The lease is given back in the lifecycle transaction (or at once on a
        refusal, where it was never committed).
        """
        cid = spec.client_order_id
        local = self._lease_locks.setdefault((plan.account_id, plan.instrument_id), asyncio.Lock())
        async with local:
            lease = _Lease(plan.account_id, entry_scope(plan.instrument_id), new_owner_token(), self.config.lock_ttl_s)
            deadline = time.monotonic() + self.config.lock_ttl_s + self.config.lock_wait_margin_s
            delay_s = 0.02
            while True:
                try:
                    intent, blocked = await in_db_thread(lifecycle.entry_intent_create)(
                        spec=spec, blocked=self._blocked, lease=lease.take, after_insert=_in_flight(signal)
                    )
                except InsufficientCapital as exc:
                    return await self._record(
                        signal, plan.account_id, Outcome.INSUFFICIENT_CAPITAL, str(exc), client_order_id=cid, entry=True
                    )
                if blocked is not _LEASE_HELD:
                    break
                next_delay_s = await self._backoff(deadline, delay_s, cap_s=0.5)
                if next_delay_s is None:
                    return await self._record(
                        signal,
                        plan.account_id,
                        Outcome.LOCK_TIMEOUT,
                        "the entry lease stayed held past its TTL",
                        client_order_id=cid,
                        entry=True,
                    )
                delay_s = next_delay_s
            if intent is None:
                assert blocked is not None
                return blocked
            lease.held = True
            try:
                self._step("after_reserve")
                return await self._place_and_persist(signal, plan, spec, broker, entry=True, lease=lease)
            finally:
                if lease.held:
                    await in_db_thread(lease.release)()

    async def _await_closed(self, position_id: int) -> bool:
        """Wait, holding no lease, until the position row is CLOSED (its exit filled, live or via reconciliation)."""
        deadline = time.monotonic() + self.config.reversal_wait_s
        delay_s = 0.02
        # A wait is no work: its concurrency slot goes back, so waiting reversals never
        # stall the signals behind them.
        slot = _SIGNAL_SLOT.get()
        if slot is not None:
            slot.give_back()
        while True:
            if await in_db_thread(selectors.position_closed)(position_id):
                return True
            next_delay_s = None if self._stopping else await self._backoff(deadline, delay_s, cap_s=0.25)
            if next_delay_s is None:
                return False
            delay_s = next_delay_s

    async def _backoff(self, deadline: float, delay_s: float, *, cap_s: float) -> float | None:
        """Sleep one step of a doubling wait; return the next step, or None once `deadline` (monotonic) has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        await self._sleep(min(delay_s, remaining))
        return min(delay_s * 2, cap_s)

    def _blocked(self, spec: IntentSpec) -> EntryBlocked | None:
        """The kill switch, then the lifecycle re-check: run under the lease, in the reserve transaction.

        Checked on every attempt, so a switch engaged while a reversal waited still halts it.
        """
        return self._blocked_many([spec])[spec.client_order_id]

    def _gate_read(self, specs: Sequence[IntentSpec]) -> _GateRead | None:
        """The kill switch read of `specs`' accounts as a statement to send with the reserve's locks, where the gate offers one."""
        gate = self._entry_gate_many
        statement_of = getattr(gate, "statement", None)
        from_rows = getattr(gate, "from_rows", None)
        if gate is None or not callable(statement_of) or not callable(from_rows) or not specs:
            return None
        account_ids = sorted({spec.account_id for spec in specs})
        return _GateRead(statement_of(account_ids), lambda rows: from_rows(account_ids, rows))

    def _blocked_many(
        self,
        specs: list[IntentSpec],
        states: Mapping[str, selectors.EntryState] | None = None,
        *,
        gates: Mapping[int, str | None] | None = None,
    ) -> dict[str, EntryBlocked | None]:
        """`_blocked` for the entries of several accounts: the kill switches (one read with `entry_gate_many`), the state in one read.

        `states`: the entries' states, read already under the locks (the group's reserve
        transaction reads them with the locks, in one round trip); `gates`: the kill
        switches' answer, read in that same round trip.
        """
        reasons: dict[str, EntryBlocked | None] = {}
        checked = []
        if gates is None:
            if self._entry_gate_many is not None:
                gates = self._entry_gate_many(sorted({spec.account_id for spec in specs}))
            else:
                gates = {spec.account_id: self._entry_gate(spec.account_id) for spec in specs}
        for spec in specs:
            halted = gates.get(spec.account_id)
            if halted:
                reasons[spec.client_order_id] = EntryBlocked(Outcome.HALTED, halted)
            else:
                checked.append(spec)
        if states is None:
            states = selectors.entry_states([(s.client_order_id, s.account_id, s.instrument_id) for s in checked])
        for spec in checked:
            reasons[spec.client_order_id] = _entry_blocked(spec, states[spec.client_order_id])
        return reasons

    @contextlib.asynccontextmanager
    async def _entry_lease(self, plan: TradePlan) -> AsyncIterator[bool]:
        """Hold the (account, instrument) entry lease for an exit: in-process lock first, then the row lease.

        Waited for like an entry's (until released or expired, at most the TTL plus a
        margin); False only when the lease stayed held past that.
        """
        local = self._lease_locks.setdefault((plan.account_id, plan.instrument_id), asyncio.Lock())
        async with local:
            owner = new_owner_token()
            scope = entry_scope(plan.instrument_id)
            deadline = time.monotonic() + self.config.lock_ttl_s + self.config.lock_wait_margin_s
            delay_s = 0.02
            while not await in_db_thread(lock_acquire)(
                account_id=plan.account_id, scope=scope, owner=owner, ttl_s=self.config.lock_ttl_s
            ):
                next_delay_s = await self._backoff(deadline, delay_s, cap_s=0.5)
                if next_delay_s is None:
                    yield False
                    return
                delay_s = next_delay_s
            try:
                yield True
            finally:
                await in_db_thread(lock_release)(account_id=plan.account_id, scope=scope, owner=owner)

    async def _place_and_persist(
        self,
        signal: Signal,
        plan: TradePlan,
        spec: IntentSpec,
        broker: Broker,
        *,
        entry: bool,
        lease: _Lease | None = None,
    ) -> str:
        cid = spec.client_order_id

        async def decide(outcome: Outcome, reason: str = "") -> str:
            return await self._record(signal, plan.account_id, outcome, reason, client_order_id=cid, entry=entry)

        request = _request(spec, plan, entry=entry)
        started = time.monotonic()
        try:
            acknowledged = await self._place(broker, request)
        except BrokerRejected as exc:
            await in_db_thread(lifecycle.intent_abandon)(client_order_id=cid, reason=str(exc))
            return await decide(Outcome.BROKER_REJECTED, str(exc))
        except BrokerUnavailable as exc:
            # Unknown outcome: the intent keeps its reservation until its resolution
            # (reconciliation, lookup by client id, or an operator) says what happened.
            await in_db_thread(lifecycle.intent_mark_unresolved)(client_order_id=cid)
            self._report(Status.DEGRADED, f"broker {broker.name} unavailable: {exc}")
            return await decide(Outcome.UNKNOWN, f"broker {broker.name}: {exc}")
        finally:
            _broker_latency(broker.name).observe(time.monotonic() - started)
        self._step("after_place")
        return await self._persist(signal, plan, spec, acknowledged, entry=entry, lease=lease)

    async def _persist(
        self,
        signal: Signal,
        plan: TradePlan,
        spec: IntentSpec,
        acknowledged: BrokerOrder,
        *,
        entry: bool,
        lease: _Lease | None,
    ) -> str:
        """Persist one acknowledged order's lifecycle with its `placed` outcome (and the lease release)."""
        cid = spec.client_order_id
        reason = f"exchange order {acknowledged.exchange_order_id}"
        recorded: list[bool] = []

        def before_commit() -> None:
            # The outcome commits with the order it names (and the lease release).
            _outcome_write(signal, plan.account_id, Outcome.PLACED, reason, cid)
            recorded.append(True)
            self._step("before_commit")

        await in_db_thread(lifecycle.lifecycle_persist)(
            broker_order=acknowledged,
            before_commit=before_commit,
            on_begin=lease.release if lease is not None else None,
            account_id=plan.account_id,
            owner_id=plan.owner_id,
        )
        if lease is not None:
            lease.held = False
        SIGNAL_TO_ACK_SECONDS.observe(max(self._clock_ns() - signal.emitted_ns, 0) / 1e9)
        self._report(Status.HEALTHY, f"last order {cid} acknowledged")
        if not recorded:  # persisted before (adopted by reconciliation meanwhile)
            return await self._record(signal, plan.account_id, Outcome.PLACED, reason, client_order_id=cid, entry=entry)
        return self._count(Outcome.PLACED, entry=entry)

    async def _place(self, broker: Broker, request: OrderRequest) -> BrokerOrder:
        try:
            return await asyncio.wait_for(broker.place_order(request), self.config.broker_timeout_s)
        except DuplicateClientOrderId:
            # Our own earlier attempt (or another process) got there first: adopt it.
            return await asyncio.wait_for(
                broker.fetch_order(client_order_id=request.client_order_id, symbol=request.symbol),
                self.config.broker_timeout_s,
            )
        except (TimeoutError, OSError) as exc:
            raise BrokerUnavailable(f"place {request.client_order_id}: {exc!r}") from exc

    # ---- exit -------------------------------------------------------------------------

    async def _exit(self, signal: Signal, plan: TradePlan, attempt: _Attempt) -> str:
        position_side = POSITION_OF[signal.kind]
        cid = client_order_id(
            prefix=self.config.client_id_prefix, account_id=plan.account_id, signal_key=signal_key(signal)
        )
        attempt.client_order_id = cid

        async def decide(outcome: Outcome, reason: str = "") -> str:
            return await self._record(signal, plan.account_id, outcome, reason, client_order_id=cid, entry=False)

        try:
            broker = self._broker_for(plan)
        except BrokerNotConfigured as exc:
            self._report(Status.DEGRADED, str(exc))
            return await decide(Outcome.BROKER_NOT_CONFIGURED, str(exc))
        async with self._entry_lease(plan) as leased:
            if not leased:
                return await decide(Outcome.LOCK_TIMEOUT, "the entry lease stayed held past its TTL")
            working = await in_db_thread(selectors.working_entries)(
                account_id=plan.account_id,
                instrument_id=plan.instrument_id,
                strategy_id=plan.strategy_id,
                position_side=position_side,
            )
            for order in working:
                try:
                    await asyncio.wait_for(
                        broker.cancel_order(
                            client_order_id=order.client_order_id,
                            exchange_order_id=order.exchange_order_id,
                            symbol=plan.venue_symbol,
                        ),
                        self.config.broker_timeout_s,
                    )
                except (OrderNotFound, BrokerRejected):
                    pass  # it ended meanwhile; order_sync reads its final state
                await order_sync(broker=broker, account_id=plan.account_id, order=order, symbol=plan.venue_symbol)
            spec = IntentSpec(
                client_order_id=cid,
                account_id=plan.account_id,
                strategy_id=plan.strategy_id,
                instrument_id=plan.instrument_id,
                intent=Intent.EXIT,
                position_side=position_side,
                side=OrderSide.SELL if position_side == PositionSide.LONG else OrderSide.BUY,
                order_type=OrderType.MARKET,
                quantity=1,  # sized under the position's lock by exit_intent_create
                price=signal.price,
                reserve=0,
                signal_kind=str(signal.kind),
                signal_output_id=signal.output_id,
            )
            sizing = await in_db_thread(lifecycle.exit_intent_create)(
                spec=spec, between_reads=lambda: self._step("exit_position_read"), after_insert=_in_flight(signal)
            )
            if sizing.refusal == ExitRefusal.DUPLICATE:
                return await decide(Outcome.DUPLICATE, "this signal's exit already exists")
            if sizing.refusal == ExitRefusal.NO_POSITION:
                return await decide(Outcome.NO_POSITION, f"no open {position_side} position to close")
            if sizing.refusal == ExitRefusal.ALREADY_CLOSING:
                return await decide(
                    Outcome.ALREADY_CLOSING,
                    f"open {sizing.open_quantity} is covered by working exits of {sizing.closing}",
                )
            assert sizing.intent is not None
            spec = replace(spec, quantity=sizing.intent.quantity)
            self._step("exit_intent_created")
            return await self._place_and_persist(signal, plan, spec, broker, entry=False)

    # ---- reporting --------------------------------------------------------------------

    async def _record(
        self,
        signal: Signal,
        account_id: int | None,
        outcome: Outcome,
        reason: str = "",
        *,
        client_order_id: str = "",
        entry: bool = True,
    ) -> str:
        """Record the outcome (row, audit event, metric) and count it."""
        await in_db_thread(_outcome_write)(signal, account_id, outcome, reason, client_order_id)
        return self._count(outcome, entry=entry)

    def _count(self, outcome: Outcome, *, entry: bool) -> str:
        """Final outcomes also count in the entries/exits metric and `outcomes`; a wait does not."""
        name = str(outcome)
        if outcome != Outcome.WAITING_FOR_EXIT:
            counter = _COUNTERS.get((entry, name))
            if counter is None:
                counter = _COUNTERS[(entry, name)] = (ENTRIES if entry else EXITS).labels(name)
            counter.inc()
            self.outcomes[name] = self.outcomes.get(name, 0) + 1
        return name

    def _report(self, status: Status, reason: str) -> None:
        if self._health is not None:
            self._health.set(COMPONENT, status, reason)


# Metric children, looked up once: a label lookup per entry is measurable on the entry path.
_COUNTERS: dict[tuple[bool, str], Any] = {}
_LATENCIES: dict[str, Any] = {}


def _broker_latency(broker: str) -> Any:
    child = _LATENCIES.get(broker)
    if child is None:
        child = _LATENCIES[broker] = BROKER_LATENCY.labels(broker, "place")
    return child


def _request(spec: IntentSpec, plan: TradePlan, *, entry: bool) -> OrderRequest:
    return OrderRequest(
        client_order_id=spec.client_order_id,
        symbol=plan.venue_symbol,
        side=spec.side,
        order_type=spec.order_type,
        quantity=spec.quantity,
        price=spec.price if spec.order_type == OrderType.LIMIT else None,
        reduce_only=not entry,
    )


def _outcome_write(signal: Signal, account_id: int | None, outcome: Outcome, reason: str, client_order_id: str) -> None:
    """Write the signal's outcome on the account, with its audit event and metric.

    A duplicate (the same signal seen again, here or by another process) leaves its
    audit event and metric but never touches the signal's row: that row belongs to
    the handling that created the intent, and overwriting it would hide its order.
    """
    if outcome == Outcome.DUPLICATE:
        audit_record(
            event=f"signal.{outcome}",
            account_id=account_id,
            strategy_id=signal.strategy_id,
            client_order_id=client_order_id,
            message=f"{signal.strategy_name} {signal.kind} {signal.symbol}: {reason}",
            details={"signal_key": signal_key(signal), "output_id": signal.output_id},
        )
        outcome_counter(str(signal.kind), str(outcome)).inc()
        return
    signal_outcome_record(
        signal=signal, account_id=account_id, outcome=outcome, reason=reason, client_order_id=client_order_id
    )


def _outcomes_by_signal(members: Sequence[_Member], decisions: Sequence[Decision]) -> None:
    """Record `decisions` (of the members' accounts), grouped by signal, in one `signal_outcomes_record_batch`."""
    signal_of = {member.cid: member.signal for member in members}
    by_signal: dict[int, tuple[Signal, list[Decision]]] = {}
    for decision in decisions:
        signal = signal_of[decision.client_order_id]
        by_signal.setdefault(id(signal), (signal, []))[1].append(decision)
    signal_outcomes_record_batch(list(by_signal.values()))


# At most this many queued signals are taken together into one batch.
BATCH_MAX = 64


@dataclass
class _Slot:
    """A signal's share of the executor's concurrency, given back once (at the end, or when it starts waiting)."""

    semaphore: asyncio.Semaphore
    held: bool = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.semaphore.release()


_SIGNAL_SLOT: ContextVar[_Slot | None] = ContextVar("orders_signal_slot", default=None)

IN_FLIGHT_REASON = "reserved; being sent to the broker"


@dataclass(eq=False)
class _Member:
    """One account's entry inside a signal's group: where it stands."""

    plan: TradePlan
    signal: Signal
    slot: _Slot | None = None  # the signal's slot, when the group holds several signals
    cid: str = ""
    spec: IntentSpec | None = None
    broker: Broker | None = None
    request: OrderRequest | None = None
    owner: str = ""  # the entry lease's owner token
    local: asyncio.Lock | None = None  # the in-process lease lock, while held
    lease_held: bool = False  # the row lease is committed and not given back yet
    refused: Outcome | None = None  # refused before the reserve transaction (recorded in it)
    outcome: str | None = None
    solo: asyncio.Future[str] | None = None  # continued on its own flow
    group: asyncio.Task[list[str]] | None = None  # the group's task, in a batch of signals

    def refuse(self, refusals: list[Decision], outcome: Outcome, reason: str) -> None:
        self.refused = outcome
        refusals.append(Decision(self.plan.account_id, outcome, reason, self.cid))

    def give_back_local(self) -> None:
        if self.local is not None:
            self.local.release()
            self.local = None

    def lease(self) -> tuple[int, str, str]:
        return (self.plan.account_id, entry_scope(self.plan.instrument_id), self.owner)


def _in_flight(signal: Signal) -> Callable[[OrderIntent], None]:
    """Record the signal in flight with its intent, in the intent's transaction.

    If the process dies before the broker answers, the signal still has its row, with
    the client order id reconciliation settles it by (adopted: placed; never at the
    broker: abandoned).
    """

    def record(intent: OrderIntent) -> None:
        signal_outcome_record(
            signal=signal,
            account_id=intent.account_id,
            outcome=Outcome.IN_FLIGHT,
            reason=IN_FLIGHT_REASON,
            client_order_id=intent.client_order_id,
        )

    return record


# The lease is held by another owner: a refusal reason that is retried, never recorded.
_LEASE_HELD = EntryBlocked(Outcome.LOCK_TIMEOUT, "the entry lease is held by another owner")


@dataclass
class _Lease:
    """An entry lease taken inside the reserve transaction and given back in the lifecycle transaction."""

    account_id: int
    scope: str
    owner: str
    ttl_s: float
    held: bool = False

    def take(self) -> EntryBlocked | None:
        taken = lock_acquire(account_id=self.account_id, scope=self.scope, owner=self.owner, ttl_s=self.ttl_s)
        return None if taken else _LEASE_HELD

    def release(self) -> None:
        lock_release(account_id=self.account_id, scope=self.scope, owner=self.owner)


@dataclass(frozen=True)
class _GateRead:
    """The kill switch read of a reserve transaction: its statement, and the answer from its rows."""

    statement: tuple[str, Sequence[Any]]
    answer: Callable[[Sequence[Any]], Mapping[int, str | None]]

    def __call__(self, rows: Sequence[Any]) -> Mapping[int, str | None]:
        return self.answer(rows)


# ---- the decision under the ledger lock (inside the reserve transaction) --------------------


def _entry_blocked(spec: IntentSpec, state: selectors.EntryState) -> EntryBlocked | None:
    """Why this entry must not be made, or None, from its state read under the ledger lock.

    One active entry per account and instrument, whatever the strategy: an open
    position (or one whose entry is still working) or a pending entry intent blocks it.
    """
    if state.duplicate:
        return EntryBlocked(Outcome.DUPLICATE, "this signal was already handled")
    position = state.position
    if position is not None:
        if position.strategy_id != spec.strategy_id:
            return EntryBlocked(
                Outcome.POSITION_OPEN,
                f"another strategy ({position.strategy_id}) holds a {position.side} position here",
            )
        if position.side != spec.position_side and selectors.exit_working(
            account_id=spec.account_id, instrument_id=spec.instrument_id, position=position
        ):
            return EntryBlocked(
                Outcome.POSITION_OPEN,
                f"the {position.side} position is still open while its exit works",
                reversing_position_id=position.id,
                reversal=selectors.reversal_choice(strategy_id=spec.strategy_id, account_id=spec.account_id),
            )
        return EntryBlocked(Outcome.POSITION_OPEN, f"a {position.side} position is already open")
    if state.pending_entry is not None:
        return EntryBlocked(Outcome.POSITION_OPEN, f"entry {state.pending_entry} is in flight here")
    return None
