"""A signal's entries on all its accounts, set-based: every account keeps its own decision and outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from dashboard.selectors import entries_halted
from dashboard.services import kill_switch_set
from orders.brokers.base import BrokerOrder, OrderRequest
from orders.brokers.paper import PaperBroker
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import InsufficientCapital, ledger_allocate, ledger_check
from orders.locks import entry_scope
from orders.models import (
    AuditEvent,
    CapitalLedger,
    EntryLock,
    Order,
    OrderIntent,
    PaperOrder,
    Position,
    SignalOutcome,
    TradeSetting,
)
from orders.plans import signal_key
from processor.models import Strategy
from processor.signals import Signal, SignalKind
from tests.orders.factories import Setup, make_instrument, make_setup, make_signal, make_strategy

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Accounts:
    strategy: Strategy
    setups: list[Setup]

    def ids(self) -> list[int]:
        return [setup.account.pk for setup in self.setups]


def _accounts(count: int, *, capital: str = "10000") -> Accounts:
    strategy = make_strategy()
    instrument = make_instrument()
    return Accounts(
        strategy, [make_setup(strategy=strategy, instrument=instrument, capital=capital) for _ in range(count)]
    )


def _executor(registry: BrokerRegistry, **kwargs: object) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        **kwargs,  # type: ignore[arg-type]
    )


def _state(signal: Signal, account_ids: list[int]) -> dict[str, object]:
    key = signal_key(signal)
    rows = {row.account_id: row for row in SignalOutcome.objects.filter(signal_key=key)}
    return {
        "outcomes": [rows[a].outcome for a in account_ids],
        "row_times": {rows[a].created_at for a in account_ids},
        "audits": {
            a: list(
                AuditEvent.objects.filter(account_id=a, event__startswith="signal.")
                .order_by("id")
                .values_list("event", flat=True)
            )
            for a in account_ids
        },
        "orders": {a: Order.objects.filter(account_id=a).count() for a in account_ids},
        "pending": OrderIntent.objects.filter(account_id__in=account_ids, state=OrderIntent.State.PENDING).count(),
        "held_leases": EntryLock.objects.filter(account_id__in=account_ids).exclude(owner="").count(),
        "reserved": {a: CapitalLedger.objects.get(account_id=a).reserved_for_orders for a in account_ids},
        "checks": [ledger_check(account_id=a).problems for a in account_ids],
    }


async def test_mixed_outcomes_in_one_group_each_account_decided_as_on_its_own(registry: BrokerRegistry) -> None:
    """Insufficient capital, halted and already holding a position each refuse one account only; the rest place."""
    group = await database_sync_to_async(_accounts)(5)
    poor, halted, holding, placed_a, placed_b = group.ids()

    def prepare() -> Strategy:
        ledger_allocate(account_id=poor, allocated_capital=1)
        owner = group.setups[1].account.owner
        kill_switch_set(actor=owner, account_id=halted, engaged=True, reason="maintenance")
        # Another strategy of the holding account already has an entry on this instrument.
        other = make_strategy()
        TradeSetting.objects.create(
            strategy=other, account=group.setups[2].account, quantity=Decimal("0.01"), mode="paper"
        )
        return other

    other = await database_sync_to_async(prepare)()
    executor = _executor(registry, entry_gate=lambda account_id: entries_halted(account_id=account_id))
    assert await executor.handle(make_signal(other, SignalKind.ENTRY_LONG)) == ["placed"]

    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)
    outcomes = await executor.handle(signal)

    assert outcomes == ["insufficient_capital", "halted", "position_open", "placed", "placed"]
    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["outcomes"] == outcomes
    assert len(state["row_times"]) == 1  # recorded together, in one statement
    audits = state["audits"]
    assert audits[poor] == ["signal.insufficient_capital"]
    assert audits[halted] == ["signal.halted"]
    assert audits[placed_a] == audits[placed_b] == ["signal.in_flight", "signal.placed"]
    assert state["orders"] == {poor: 0, halted: 0, holding: 1, placed_a: 1, placed_b: 1}
    assert state["pending"] == 0 and state["held_leases"] == 0
    assert state["reserved"][poor] == 0 and state["reserved"][halted] == 0
    assert state["reserved"][placed_a] > 0
    assert state["checks"] == [()] * 5
    reason = await database_sync_to_async(
        lambda: SignalOutcome.objects.get(signal_key=signal_key(signal), account_id=halted).reason
    )()
    assert "maintenance" in reason
    assert executor.outcomes == {"placed": 3, "insufficient_capital": 1, "halted": 1, "position_open": 1}


class BrokenFor(PaperBroker):
    """A paper account whose adapter has a bug: every placement raises."""

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        raise ZeroDivisionError("a bug in the broker adapter")


async def test_an_error_in_one_accounts_placement_does_not_lose_the_others(registry: BrokerRegistry) -> None:
    group = await database_sync_to_async(_accounts)(4)
    broken = group.ids()[1]
    broken_broker = BrokenFor(account_key=str(broken))
    executor = TradeExecutor(
        broker_for=lambda plan: (
            broken_broker
            if plan.account_id == broken
            else registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode)
        ),
        config=ExecutorConfig(),
    )
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["placed", "failed", "placed", "placed"]

    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["orders"] == {a: (0 if a == broken else 1) for a in group.ids()}
    assert state["held_leases"] == 0
    assert state["checks"] == [()] * 4
    failed = await database_sync_to_async(SignalOutcome.objects.get)(signal_key=signal_key(signal), account_id=broken)
    assert "ZeroDivisionError" in failed.reason and failed.client_order_id.startswith(f"ts-{broken}-")
    # Its intent keeps the reservation until reconciliation asks the broker.
    assert await database_sync_to_async(OrderIntent.objects.filter(account_id=broken, state="PENDING").count)() == 1


async def test_an_error_in_the_group_transaction_runs_every_account_on_its_own(registry: BrokerRegistry) -> None:
    """A failure inside the set-based reserve rolls it back whole; each account then decides alone, so only the
    account whose check fails is lost."""
    group = await database_sync_to_async(_accounts)(3)
    bad = group.ids()[2]

    def gate(account_id: int) -> str | None:
        if account_id == bad:
            raise RuntimeError("the kill switch store is unreadable for this account")
        return None

    executor = _executor(registry, entry_gate=gate)
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["placed", "placed", "failed"]

    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["orders"] == {a: (0 if a == bad else 1) for a in group.ids()}
    assert state["pending"] == 0 and state["held_leases"] == 0
    assert state["reserved"][bad] == 0
    assert state["checks"] == [()] * 3
    assert await database_sync_to_async(PaperOrder.objects.filter(account_key=str(bad)).count)() == 0


class LongIdBroker(PaperBroker):
    """Acknowledges with an exchange order id longer than the order row takes, so persisting that order fails."""

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        order = await super().place_order(request)
        return replace(order, exchange_order_id="X" * 200)


@pytest.mark.needs_postgres
async def test_a_failed_group_persist_persists_each_account_in_its_own_transaction(registry: BrokerRegistry) -> None:
    group = await database_sync_to_async(_accounts)(3)
    bad = group.ids()[0]
    bad_broker = LongIdBroker(account_key=str(bad))
    executor = TradeExecutor(
        broker_for=lambda plan: (
            bad_broker
            if plan.account_id == bad
            else registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode)
        ),
        config=ExecutorConfig(),
    )
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["failed", "placed", "placed"]

    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["orders"] == {a: (0 if a == bad else 1) for a in group.ids()}
    assert state["held_leases"] == 0
    assert state["checks"] == [()] * 3


@pytest.mark.needs_postgres
async def test_a_capital_change_landing_during_the_group_waits_for_it_and_sees_its_reservations(
    registry: BrokerRegistry,
) -> None:
    """A concurrent allocation change on one of the group's accounts, issued between the group's ledger read and
    its reservation, waits for the group's ledger lock; it then applies against the committed reservation (and is
    refused when it would leave `available` negative): the two never interleave."""
    group = await database_sync_to_async(_accounts)(3)
    target = group.ids()[1]
    landed: dict[str, object] = {}
    writer: list[threading.Thread] = []

    def cut_capital() -> None:
        try:
            ledger_allocate(account_id=target, allocated_capital=1)
            landed["result"] = "applied"
        except InsufficientCapital as exc:
            landed["result"] = exc
        finally:
            landed["at"] = time.monotonic()
            connection.close()  # this thread's own connection

    def gate(account_id: int) -> str | None:
        # Runs inside the group's transaction, after the ledger locks: the write starts now.
        if account_id == target and not writer:
            thread = threading.Thread(target=cut_capital)
            writer.append(thread)
            thread.start()
            thread.join(0.3)
            landed["blocked"] = thread.is_alive()
            landed["released_at"] = time.monotonic()
        return None

    executor = _executor(registry, entry_gate=gate)
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["placed", "placed", "placed"]
    writer[0].join(10)

    assert landed["blocked"] is True  # held back by the group's ledger lock
    assert landed["at"] > landed["released_at"]
    assert isinstance(landed["result"], InsufficientCapital)  # it saw the committed reservation
    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["checks"] == [()] * 3
    ledger = await database_sync_to_async(CapitalLedger.objects.get)(account_id=target)
    assert ledger.allocated_capital > 1 and ledger.reserved_for_orders > 0


@pytest.mark.needs_postgres
async def test_a_kill_switch_engaged_after_the_group_began_halts_it(registry: BrokerRegistry) -> None:
    """The switch is read inside the reserve transaction, after the leases and ledger locks: one engaged by another
    connection after the group started (before its check) halts every account, and nothing is reserved."""
    group = await database_sync_to_async(_accounts)(3)
    staff = await database_sync_to_async(_staff)()
    engaged: list[bool] = []

    def engage() -> None:
        kill_switch_set(actor=staff, account_id=None, engaged=True, reason="market halt")
        connection.close()  # this thread's own connection

    def gate(account_id: int) -> str | None:
        if not engaged:
            thread = threading.Thread(target=engage)
            thread.start()
            thread.join(10)
            engaged.append(True)
        return entries_halted(account_id=account_id)

    executor = _executor(registry, entry_gate=gate)
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["halted", "halted", "halted"]
    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["reserved"] == dict.fromkeys(group.ids(), 0)
    assert state["pending"] == 0 and state["held_leases"] == 0
    assert await database_sync_to_async(Position.objects.filter(account_id__in=group.ids()).count)() == 0


def _staff():  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="ops-staff", password="pw-123456", is_staff=True)


async def test_an_account_whose_lease_another_owner_holds_waits_on_its_own(registry: BrokerRegistry) -> None:
    """The group does not wait for one account's lease: that account takes the lease over once it expires."""
    from orders.locks import lock_acquire

    group = await database_sync_to_async(_accounts)(3)
    held = group.ids()[0]
    await database_sync_to_async(lock_acquire)(
        account_id=held, scope=entry_scope(group.setups[0].instrument.pk), owner="another-process", ttl_s=0.3
    )
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(lock_ttl_s=0.3, lock_wait_margin_s=2.0),
    )
    signal = make_signal(group.strategy, SignalKind.ENTRY_LONG)

    assert await executor.handle(signal) == ["placed", "placed", "placed"]
    state = await database_sync_to_async(_state)(signal, group.ids())
    assert state["held_leases"] == 0 and state["checks"] == [()] * 3
