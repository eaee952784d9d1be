"""The trade executor: signals in, broker orders out, through the ENTRY/EXIT flows of seed 003.

ENTRY: entry lock (row lease, TTL, owner token) -> re-check the lifecycle -> reserve
capital with the intent -> place at the broker with the deterministic client order id
-> persist the lifecycle in one transaction -> release the lock. EXIT mirrors it:
cancel the position's working entry, place the closing order, persist; fills realize
P&L. A missing trade setting or a broker failure never reaches the processor: signals
and outputs flow on, the failure is audited and shown as health.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Optional

from orders.db import in_db_thread

from orders import lifecycle
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
from orders.ledger import InsufficientCapital
from orders.lifecycle import IntentSpec
from orders.locks import entry_scope, lock_acquire, lock_release, new_owner_token
from orders.metrics import BROKER_LATENCY, ENTRIES, EXITS, SIGNAL_TO_ACK_SECONDS
from orders.models import Order, OrderIntent, Position
from orders.models.lifecycle import TERMINAL_STATUSES, Intent, OrderSide, OrderType, PositionSide
from orders.money import entry_reservation, round_to_step
from orders.plans import TradePlan, plans_for_signal, signal_key
from orders.sync import order_sync
from processor.signals import Signal, SignalKind
from tradingsite.health import HealthBoard, Status

log = logging.getLogger(__name__)

COMPONENT = "orders:executor"
BrokerFor = Callable[[TradePlan], Broker]
StepHook = Callable[[str], None]


@dataclass(frozen=True)
class ExecutorConfig:
    client_id_prefix: str = "ts"
    lock_ttl_s: float = 30.0
    broker_timeout_s: float = 10.0  # below the lock TTL: an entry never outlives its lease
    market_buffer_bps: int = 50
    fee_reserve_bps: int = 10
    max_concurrent: int = 64


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
EntryGate = Callable[[int], Optional[str]]


def _never_halted(account_id: int) -> str | None:
    return None


class TradeExecutor:
    """Consumes signals; one task per signal, serialized per strategy and symbol so an exit precedes the next entry."""

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
    ) -> None:
        self._broker_for = broker_for
        self.config = config
        self._health = health
        self._step = step_hook
        self._entry_gate = entry_gate
        self._clock_ns = clock_ns
        self._sleep = sleep
        self._key_locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._lease_locks: dict[tuple[int, int], asyncio.Lock] = {}
        self._slots = asyncio.Semaphore(config.max_concurrent)
        self.outcomes: dict[str, int] = {}

    async def run(self, signals: asyncio.Queue[Signal]) -> None:
        """Handle every queued signal until cancelled."""
        self._report(Status.HEALTHY, "waiting for signals")
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                signal = await signals.get()
                await self._slots.acquire()
                task = asyncio.create_task(self._handle_guarded(signal), name=f"trade:{signal.strategy_name}")
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            for task in tasks:
                task.cancel()

    async def _handle_guarded(self, signal: Signal) -> None:
        try:
            lock = self._key_locks.setdefault((signal.strategy_id, signal.symbol), asyncio.Lock())
            async with lock:
                await self.handle(signal)
        except Exception as exc:  # one failed trade must not stop the executor
            log.exception("orders executor: signal %s failed", signal_key(signal))
            self._report(Status.DEGRADED, f"last signal failed: {exc!r}")
        finally:
            self._slots.release()

    async def handle(self, signal: Signal) -> list[str]:
        """Execute one signal on every account set up for its strategy; return an outcome per account."""
        plans = await in_db_thread(plans_for_signal)(signal)
        if not plans:
            await in_db_thread(audit_record)(
                event="signal.no_trade_setting",
                account_id=None,
                strategy_id=signal.strategy_id,
                message=f"{signal.strategy_name} {signal.kind} {signal.symbol}: no enabled trade setting (or unknown instrument)",
            )
            self._count("no_trade_setting")
            return ["no_trade_setting"]
        flow = self._entry if signal.kind in (SignalKind.ENTRY_LONG, SignalKind.ENTRY_SHORT) else self._exit
        outcomes = await asyncio.gather(*(flow(signal, plan) for plan in plans))
        return list(outcomes)

    # ---- entry ------------------------------------------------------------------------

    async def _entry(self, signal: Signal, plan: TradePlan) -> str:
        cid = client_order_id(prefix=self.config.client_id_prefix, account_id=plan.account_id, signal_key=signal_key(signal))
        if plan.quantity <= 0:
            await self._audit("entry.rejected", plan, cid, "quantity rounds to zero at the lot size")
            return self._count("rejected", entry=True)
        halted = await in_db_thread(self._entry_gate)(plan.account_id)
        if halted:
            await self._audit("entry.halted", plan, cid, halted)
            return self._count("halted", entry=True)
        position_side = POSITION_OF[signal.kind]
        side = OrderSide.BUY if position_side == PositionSide.LONG else OrderSide.SELL
        price = round_to_step(signal.price, plan.tick_size, up=side == OrderSide.SELL)
        spec = IntentSpec(
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
        broker = await self._resolve(plan, cid, entry=True)
        if broker is None:
            return self._count("broker_not_configured", entry=True)
        async with self._entry_lease(plan) as leased:
            if not leased:
                return self._count("lock_contended", entry=True)
            try:
                if not await in_db_thread(_entry_prepare)(spec):
                    return self._count("skipped", entry=True)
            except InsufficientCapital as exc:
                await self._audit("entry.rejected", plan, cid, str(exc))
                return self._count("insufficient_capital", entry=True)
            self._step("after_reserve")
            return await self._place_and_persist(signal, plan, spec, broker, entry=True)

    @contextlib.asynccontextmanager
    async def _entry_lease(self, plan: TradePlan) -> AsyncIterator[bool]:
        """Hold the (account, instrument) entry lease: in-process lock first, then the row lease.

        Another process holding the row is waited for with backoff up to the lock TTL (seed
        003: the loser retries after the TTL); the re-check under the lease then skips a
        signal the winner already handled.
        """
        local = self._lease_locks.setdefault((plan.account_id, plan.instrument_id), asyncio.Lock())
        async with local:
            owner = new_owner_token()
            scope = entry_scope(plan.instrument_id)
            deadline = time.monotonic() + self.config.lock_ttl_s
            delay_s = 0.02
            while not await in_db_thread(lock_acquire)(
                account_id=plan.account_id, scope=scope, owner=owner, ttl_s=self.config.lock_ttl_s
            ):
                if time.monotonic() + delay_s > deadline:
                    yield False
                    return
                await self._sleep(delay_s)
                delay_s = min(delay_s * 2, 0.5)
            try:
                yield True
            finally:
                await in_db_thread(lock_release)(account_id=plan.account_id, scope=scope, owner=owner)

    async def _resolve(self, plan: TradePlan, cid: str, *, entry: bool) -> Broker | None:
        try:
            return self._broker_for(plan)
        except BrokerNotConfigured as exc:
            await self._audit("entry.failed" if entry else "exit.failed", plan, cid, str(exc))
            self._report(Status.DEGRADED, str(exc))
            return None

    async def _place_and_persist(
        self, signal: Signal, plan: TradePlan, spec: IntentSpec, broker: Broker, *, entry: bool
    ) -> str:
        request = OrderRequest(
            client_order_id=spec.client_order_id,
            symbol=plan.venue_symbol,
            side=spec.side,
            order_type=spec.order_type,
            quantity=spec.quantity,
            price=spec.price if spec.order_type == OrderType.LIMIT else None,
            reduce_only=not entry,
        )
        started = time.monotonic()
        try:
            acknowledged = await self._place(broker, request)
        except BrokerRejected as exc:
            await in_db_thread(lifecycle.intent_abandon)(client_order_id=spec.client_order_id, reason=str(exc))
            return self._count("rejected", entry=entry)
        except BrokerUnavailable as exc:
            # Unknown outcome: the intent keeps its reservation until reconciliation asks the broker.
            await self._audit("entry.unknown" if entry else "exit.unknown", plan, spec.client_order_id, str(exc))
            self._report(Status.DEGRADED, f"broker {broker.name} unavailable: {exc}")
            return self._count("unknown", entry=entry)
        finally:
            BROKER_LATENCY.labels(broker.name, "place").observe(time.monotonic() - started)
        self._step("after_place")
        await in_db_thread(lifecycle.lifecycle_persist)(
            broker_order=acknowledged, before_commit=lambda: self._step("before_commit")
        )
        SIGNAL_TO_ACK_SECONDS.observe(max(self._clock_ns() - signal.emitted_ns, 0) / 1e9)
        self._report(Status.HEALTHY, f"last order {spec.client_order_id} acknowledged")
        return self._count("placed", entry=entry)

    async def _place(self, broker: Broker, request: OrderRequest) -> BrokerOrder:
        try:
            return await asyncio.wait_for(broker.place_order(request), self.config.broker_timeout_s)
        except DuplicateClientOrderId:
            # Our own earlier attempt (or another process) got there first: adopt it.
            return await asyncio.wait_for(
                broker.fetch_order(client_order_id=request.client_order_id, symbol=request.symbol),
                self.config.broker_timeout_s,
            )
        except (asyncio.TimeoutError, OSError) as exc:
            raise BrokerUnavailable(f"place {request.client_order_id}: {exc!r}") from exc

    # ---- exit -------------------------------------------------------------------------

    async def _exit(self, signal: Signal, plan: TradePlan) -> str:
        position_side = POSITION_OF[signal.kind]
        broker = await self._resolve(plan, "", entry=False)
        if broker is None:
            return self._count("broker_not_configured", entry=False)
        async with self._entry_lease(plan) as leased:
            if not leased:
                return self._count("lock_contended", entry=False)
            working = await in_db_thread(_working_entries)(plan, position_side)
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
            quantity = await in_db_thread(_open_quantity)(plan, position_side)
            if quantity <= 0:
                return self._count("no_position", entry=False)
            cid = client_order_id(
                prefix=self.config.client_id_prefix, account_id=plan.account_id, signal_key=signal_key(signal)
            )
            spec = IntentSpec(
                client_order_id=cid,
                account_id=plan.account_id,
                strategy_id=plan.strategy_id,
                instrument_id=plan.instrument_id,
                intent=Intent.EXIT,
                position_side=position_side,
                side=OrderSide.SELL if position_side == PositionSide.LONG else OrderSide.BUY,
                order_type=OrderType.MARKET,
                quantity=quantity,
                price=signal.price,
                reserve=0,
                signal_kind=str(signal.kind),
                signal_output_id=signal.output_id,
            )
            _, created = await in_db_thread(lifecycle.intent_create)(spec=spec)
            if not created:
                return self._count("skipped", entry=False)
            return await self._place_and_persist(signal, plan, spec, broker, entry=False)

    # ---- reporting --------------------------------------------------------------------

    async def _audit(self, event: str, plan: TradePlan, cid: str, message: str) -> None:
        await in_db_thread(audit_record)(
            event=event, account_id=plan.account_id, strategy_id=plan.strategy_id, client_order_id=cid, message=message
        )

    def _count(self, outcome: str, *, entry: bool = True) -> str:
        (ENTRIES if entry else EXITS).labels(outcome).inc()
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        return outcome

    def _report(self, status: Status, reason: str) -> None:
        if self._health is not None:
            self._health.set(COMPONENT, status, reason)


def _entry_prepare(spec: IntentSpec) -> bool:
    """Under the lease: re-check the lifecycle, then reserve with the intent; False when the entry is not to be made."""
    if _entry_blocked(spec):
        return False
    _, created = lifecycle.intent_create(spec=spec)
    return created


def _entry_blocked(spec: IntentSpec) -> bool:
    """This signal was already handled, or the strategy already holds (or is entering) a position here."""
    if OrderIntent.objects.filter(client_order_id=spec.client_order_id).exists():
        return True
    return Position.objects.filter(
        account_id=spec.account_id,
        instrument_id=spec.instrument_id,
        strategy_id=spec.strategy_id,
        state=Position.State.OPEN,
    ).exists() or OrderIntent.objects.filter(
        account_id=spec.account_id,
        instrument_id=spec.instrument_id,
        strategy_id=spec.strategy_id,
        state=OrderIntent.State.PENDING,
    ).exists()


def _working_entries(plan: TradePlan, position_side: str) -> list[Order]:
    return list(
        Order.objects.filter(
            account_id=plan.account_id,
            instrument_id=plan.instrument_id,
            strategy_id=plan.strategy_id,
            intent=Intent.ENTRY,
            position__side=position_side,
            position__state=Position.State.OPEN,
        ).exclude(status__in=TERMINAL_STATUSES)
    )


def _open_quantity(plan: TradePlan, position_side: str) -> int:
    position = Position.objects.filter(
        account_id=plan.account_id,
        instrument_id=plan.instrument_id,
        strategy_id=plan.strategy_id,
        side=position_side,
        state=Position.State.OPEN,
    ).first()
    if position is None:
        return 0
    # An exit already working covers part of the position.
    working_exit = sum(
        order.quantity - order.filled_quantity
        for order in position.orders.filter(intent=Intent.EXIT).exclude(status__in=TERMINAL_STATUSES)
    )
    return position.quantity - working_exit
