"""Lifecycle handlers: the only code that writes intents, orders, fills and positions.

The trade executor and reconciliation both go through these (a correction is never a
raw status patch). Each handler is one durable transaction that locks the
account's ledger row first, then the intent/order, then the position, and is
idempotent: persisting an order twice, or applying the same fill twice, is a no-op.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from django.db import connection, transaction
from django.utils import timezone

from core.fixed_point import fixed_to_str
from feeds.market import fixed_from_decimal
from feeds.models import Instrument
from orders import ledger as ledger_service
from orders.audit import audit_batch, audit_record, audit_record_many
from orders.brokers.base import BrokerFill, BrokerOrder
from orders.events import push_trade_event_on_commit, push_trade_events_on_commit
from orders.locks import entry_scope, locks_acquire_many_statement, locks_release_many, locks_taken
from orders.models import Account, CapitalLedger, Fill, Order, OrderIntent, OrderStatus, Position
from orders.models.lifecycle import TERMINAL_STATUSES, Intent, PositionSide
from orders.money import notional, pro_rata
from orders.round_trips import fetch_together, statements_batched
from orders.rows import any_of, insert_rows, insert_rows_later, table
from orders.selectors import EntryState, entry_states_from_rows, entry_states_statement
from orders.trade_figures import exit_reason, figures_add_entry, figures_add_exit

T = TypeVar("T")
ENDED_WITHOUT_FILLING = frozenset({OrderStatus.CANCELED, OrderStatus.REJECTED, OrderStatus.EXPIRED})


@dataclass(frozen=True)
class IntentSpec:
    """What the executor wants placed (all numbers fixed point, already rounded)."""

    client_order_id: str
    account_id: int
    strategy_id: int | None
    instrument_id: int
    intent: str  # Intent
    position_side: str  # PositionSide
    side: str  # OrderSide
    order_type: str  # OrderType
    quantity: int
    price: int
    reserve: int
    signal_kind: str = ""
    signal_output_id: str = ""


def intent_create(*, spec: IntentSpec) -> tuple[OrderIntent, bool]:
    """Reserve capital and record the intent before the broker is called; return (intent, created).

    Raises ledger.InsufficientCapital (nothing written) when the reservation does not fit.
    """
    with transaction.atomic(durable=True):
        ledger = _ledger_for(spec.account_id)
        existing = OrderIntent.objects.filter(client_order_id=spec.client_order_id).first()
        if existing is not None:
            return existing, False
        return _intent_insert(ledger, spec), True


def entry_intent_create(
    *,
    spec: IntentSpec,
    blocked: Callable[[IntentSpec], T | None],
    lease: Callable[[], T | None] | None = None,
    after_insert: Callable[[OrderIntent], None] | None = None,
) -> tuple[OrderIntent | None, T | None]:
    """Take the entry lease, ask `blocked` why not to enter under the ledger lock, else reserve and record the intent.

    One durable transaction, so the lease, the check and the reservation are one
    state and one commit: no entry of another process on the same account can reserve
    between the check and the reservation. `lease` (called first, before the ledger
    lock, the order every entry takes them in) returns a reason when the lease is held
    by someone else. Returns (intent, None) when created, (None, reason) when refused;
    a refusal writes nothing, the lease included. `after_insert` runs in the same
    transaction once the intent exists (the executor records the signal in flight, so
    a crash after this point still leaves the signal's outcome to settle). Raises
    ledger.InsufficientCapital (nothing written) when the reservation does not fit.
    """
    with transaction.atomic(durable=True):
        if lease is not None:
            held = lease()
            if held is not None:
                return None, held
        ledger = _ledger_for(spec.account_id)
        reason = blocked(spec)
        if reason is not None:
            transaction.set_rollback(True)
            return None, reason
        intent = _intent_insert(ledger, spec)
        if after_insert is not None:
            after_insert(intent)
    return intent, None


@dataclass
class EntryBatch:
    """What `entry_intents_create` did with each entry of a signal's accounts."""

    created: list[IntentSpec] = field(default_factory=list)  # reserved and recorded; the lease is held
    held: list[IntentSpec] = field(default_factory=list)  # the lease is held by another owner: nothing done
    refused: list[tuple[IntentSpec, object]] = field(default_factory=list)  # `blocked` said why not
    insufficient: list[tuple[IntentSpec, ledger_service.InsufficientCapital]] = field(default_factory=list)


_INTENT_COLUMNS = (
    "client_order_id",
    "account_id",
    "strategy_id",
    "instrument_id",
    "intent",
    "position_side",
    "side",
    "order_type",
    "quantity",
    "price",
    "reserved",
    "state",
    "signal_kind",
    "signal_output_id",
    "created_at",
    "updated_at",
)


def entry_intents_create(
    *,
    specs: Sequence[IntentSpec],
    lease_owners: Mapping[str, str],
    lease_ttl_s: float,
    blocked: Callable[[list[IntentSpec], Mapping[str, EntryState], Sequence[Sequence[Any]]], Mapping[str, T | None]],
    after: Callable[[EntryBatch], None] | None = None,
    reads: Sequence[tuple[str, Sequence[Any]]] = (),
) -> EntryBatch:
    """`entry_intent_create` for the entries of several accounts (one per account and instrument), set-based, in one durable transaction.

    Per account the decision is the one `entry_intent_create` makes, in the same
    order: the entry lease (`lease_owners`: client order id -> owner token; taken for
    all in one statement), the ledger locks (one statement, in account order), the
    lifecycle state of every entry (read after the locks were granted), then `blocked`
    (asked once for the entries whose lease was taken, with their states, under the
    locks; a reason per client order id or None), then the reservation on every ledger,
    the intents in one insert. An account whose lease another owner holds is left out
    untouched (`held`); one refused or without the capital gives its lease back in the
    same transaction and has nothing else written. `after` runs last in the
    transaction with the result (the executor records the outcomes there). `reads`:
    more row-returning statements for `blocked` (the kill switches), sent after the
    state read; their rows are its third argument, in order.

    The lease, lock, state statements and `reads` go in one round trip, and every
    write after `blocked` with the COMMIT in one more (orders.round_trips): on
    PostgreSQL each statement of a round trip still runs on its own snapshot, in
    order, so the state read sees everything committed before the locks were granted.
    """
    batch = EntryBatch()
    with transaction.atomic(durable=True), statements_batched(commit=True):
        leases = {
            spec.client_order_id: (spec.account_id, entry_scope(spec.instrument_id), lease_owners[spec.client_order_id])
            for spec in specs
        }
        account_ids = [spec.account_id for spec in specs]
        entries = [(spec.client_order_id, spec.account_id, spec.instrument_id) for spec in specs]
        started = time.monotonic()
        statements = [
            locks_acquire_many_statement(leases=list(leases.values()), ttl_s=lease_ttl_s),
            ledger_service.ledgers_lock_statement(account_ids=account_ids),
            entry_states_statement(entries),
        ]
        lease_rows, ledger_rows, state_rows, *read_rows = (
            fetch_together([*(statement for statement in statements if statement is not None), *reads])
            if specs
            else [[], [], [], *([] for _ in reads)]
        )
        taken = locks_taken(leases=list(leases.values()), rows=lease_rows, started=started)
        # The ledgers of accounts whose lease another owner holds are locked too (and
        # left unchanged): the lock order, leases then ledgers, is the same either way.
        available = ledger_service.ledgers_locked(account_ids=account_ids, rows=ledger_rows)
        states = entry_states_from_rows(entries, state_rows)
        contenders: list[IntentSpec] = []
        for spec in specs:
            (contenders if leases[spec.client_order_id][2] in taken else batch.held).append(spec)
        reasons = blocked(contenders, states, read_rows) if contenders else {}
        for spec in contenders:
            reason = reasons.get(spec.client_order_id)
            if reason is not None:
                batch.refused.append((spec, reason))
            elif spec.reserve > available[spec.account_id]:
                batch.insufficient.append(
                    (
                        spec,
                        ledger_service.InsufficientCapital(spec.account_id, spec.reserve, available[spec.account_id]),
                    )
                )
            else:
                # An account's next entry of the batch (another instrument) fits in what is left.
                available[spec.account_id] -= spec.reserve
                batch.created.append(spec)
        # Compared with `available` read under the locks, which nothing else changes
        # before the commit: the reservations are made as decided.
        ledger_service.ledgers_reserve_checked(
            reservations=[(spec.account_id, spec.reserve, spec.client_order_id) for spec in batch.created]
        )
        now = timezone.now()
        insert_rows_later(
            OrderIntent,
            _INTENT_COLUMNS,
            [
                (
                    spec.client_order_id,
                    spec.account_id,
                    spec.strategy_id,
                    spec.instrument_id,
                    spec.intent,
                    spec.position_side,
                    spec.side,
                    spec.order_type,
                    spec.quantity,
                    spec.price,
                    spec.reserve,
                    OrderIntent.State.PENDING,
                    spec.signal_kind,
                    spec.signal_output_id,
                    now,
                    now,
                )
                for spec in batch.created
            ],
        )
        created = {spec.client_order_id for spec in batch.created}
        locks_release_many(
            leases=[leases[spec.client_order_id] for spec in contenders if spec.client_order_id not in created],
            later=True,
        )
        if after is not None:
            after(batch)
    return batch


class ExitRefusal(StrEnum):
    DUPLICATE = "duplicate"  # this signal already has its intent
    NO_POSITION = "no_position"  # nothing of this side is open
    ALREADY_CLOSING = "already_closing"  # working exits already cover the open quantity


@dataclass(frozen=True)
class ExitSizing:
    intent: OrderIntent | None
    refusal: ExitRefusal | None
    open_quantity: int
    closing: int  # unfilled quantity of the position's working exits and pending exit intents


def exit_intent_create(
    *,
    spec: IntentSpec,
    between_reads: Callable[[], None] | None = None,
    after_insert: Callable[[OrderIntent], None] | None = None,
) -> ExitSizing:
    """Size an exit and record its intent in one transaction: open quantity minus what is already being closed.

    `spec.quantity` is ignored. The ledger row, then the position row are locked before
    either is read (the fill handlers take the same locks in the same order), so a
    fill cannot land between reading the position's quantity and reading its working
    exits: the two are one state, and an exit never asks for more than is open and
    not already being closed. `between_reads` runs between the two reads (tests land a
    concurrent fill there); `after_insert` in the same transaction once the intent exists.
    """
    with transaction.atomic(durable=True):
        ledger = _ledger_for(spec.account_id)
        if OrderIntent.objects.filter(client_order_id=spec.client_order_id).exists():
            return ExitSizing(None, ExitRefusal.DUPLICATE, 0, 0)
        position = (
            Position.objects.select_for_update()  # type: ignore[misc]  # the stubs refuse None for a nullable FK's lookup
            .filter(
                account_id=spec.account_id,
                instrument_id=spec.instrument_id,
                strategy_id=spec.strategy_id,
                side=spec.position_side,
                state=Position.State.OPEN,
            )
            .first()
        )
        if position is None or position.quantity <= 0:
            return ExitSizing(None, ExitRefusal.NO_POSITION, 0, 0)
        if between_reads is not None:
            between_reads()
        working = sum(
            quantity - filled
            for quantity, filled in position.orders.filter(intent=Intent.EXIT)
            .exclude(status__in=TERMINAL_STATUSES)
            .values_list("quantity", "filled_quantity")
        )
        # An exit sent but not yet confirmed (or with an unknown outcome) may be at the
        # broker already: it counts as closing until it is placed or abandoned.
        pending = sum(
            OrderIntent.objects.filter(  # type: ignore[misc]
                account_id=spec.account_id,
                instrument_id=spec.instrument_id,
                strategy_id=spec.strategy_id,
                position_side=spec.position_side,
                intent=Intent.EXIT,
                state=OrderIntent.State.PENDING,
            ).values_list("quantity", flat=True)
        )
        closing = working + pending
        quantity = position.quantity - closing
        if quantity <= 0:
            return ExitSizing(None, ExitRefusal.ALREADY_CLOSING, position.quantity, closing)
        intent = _intent_insert(ledger, replace(spec, quantity=quantity, reserve=0))
        if after_insert is not None:
            after_insert(intent)
    return ExitSizing(intent, None, position.quantity, closing)


def intent_mark_unresolved(*, client_order_id: str) -> bool:
    """The broker's answer to this intent was lost: stamp when, once (the resolution paths start from it)."""
    return bool(
        OrderIntent.objects.filter(
            client_order_id=client_order_id, state=OrderIntent.State.PENDING, unresolved_since__isnull=True
        ).update(unresolved_since=timezone.now())
    )


def _ledger_for(account_id: int) -> CapitalLedger:
    try:
        return ledger_service.ledger_lock(account_id=account_id)
    except CapitalLedger.DoesNotExist:
        ledger_service.ledger_open(account=Account.objects.get(pk=account_id))
        return ledger_service.ledger_lock(account_id=account_id)


def _intent_insert(ledger: CapitalLedger, spec: IntentSpec) -> OrderIntent:
    ledger_service.ledger_reserve(ledger=ledger, amount=spec.reserve, client_order_id=spec.client_order_id)
    return OrderIntent.objects.create(
        client_order_id=spec.client_order_id,
        account_id=spec.account_id,
        strategy_id=spec.strategy_id,
        instrument_id=spec.instrument_id,
        intent=spec.intent,
        position_side=spec.position_side,
        side=spec.side,
        order_type=spec.order_type,
        quantity=spec.quantity,
        price=spec.price,
        reserved=spec.reserve,
        signal_kind=spec.signal_kind,
        signal_output_id=spec.signal_output_id,
    )


def intent_abandon(*, client_order_id: str, reason: str, via_reconciliation: bool = False) -> bool:
    """The broker certainly does not have this order: release its reservation. Returns whether it changed."""
    with transaction.atomic(durable=True):
        intent = OrderIntent.objects.get(client_order_id=client_order_id)
        ledger = ledger_service.ledger_lock(account_id=intent.account_id)
        intent = OrderIntent.objects.select_for_update().get(pk=intent.pk)
        if intent.state != OrderIntent.State.PENDING:
            return False
        ledger_service.ledger_release(
            ledger=ledger, amount=intent.reserved, client_order_id=client_order_id, reason=f"abandoned: {reason}"
        )
        intent.state = OrderIntent.State.ABANDONED
        intent.save(update_fields=["state", "updated_at"])
        audit_record(
            event="reconcile.abandon" if via_reconciliation else f"{intent.intent.lower()}.failed",
            account_id=intent.account_id,
            strategy_id=intent.strategy_id,
            client_order_id=client_order_id,
            message=reason,
        )
    return True


def _event(order: Order, kind: str, **extra: object) -> dict[str, object]:
    return {
        "event": kind,
        "account_id": order.account_id,
        "client_order_id": order.client_order_id,
        "intent": order.intent,
        "side": order.side,
        "status": order.status,
        "quantity": fixed_to_str(order.quantity),
        "filled_quantity": fixed_to_str(order.filled_quantity),
        **extra,
    }


def lifecycle_persist(
    *,
    broker_order: BrokerOrder,
    via_reconciliation: bool = False,
    before_commit: Callable[[], None] | None = None,
    on_begin: Callable[[], None] | None = None,
    account_id: int | None = None,
    owner_id: int | None = None,
) -> Order:
    """Persist a broker-confirmed order: order row, position seed, intent handed over; one transaction.

    Idempotent on the client order id. A broker status that already ended without a
    fill (rejected on arrival) releases the reservation in the same transaction.
    `on_begin` runs first in the transaction (the executor gives its entry lease back
    there, so the release commits with the order); `before_commit` runs last, unless
    the order was already persisted. A caller that knows the intent's account and its
    owner passes them, which saves the queries that would look them up.
    """
    with transaction.atomic(durable=True):
        if on_begin is not None:
            on_begin()
        order, created = _persist_locked(
            broker_order, via_reconciliation=via_reconciliation, account_id=account_id, owner_id=owner_id
        )
        if created and before_commit is not None:
            before_commit()
    return order


_ORDER_COLUMNS = (
    "client_order_id",
    "exchange_order_id",
    "intent_row_id",
    "account_id",
    "strategy_id",
    "instrument_id",
    "position_id",
    "intent",
    "side",
    "order_type",
    "quantity",
    "price",
    "status",
    "filled_quantity",
    "filled_notional",
    "reserved",
    "reserve_released",
    "via_reconciliation",
    "created_at",
    "updated_at",
)
_POSITION_COLUMNS = (
    "account_id",
    "strategy_id",
    "instrument_id",
    "side",
    "quantity",
    "cost",
    "locked",
    "realized_pnl",
    "state",
    "opened_at",
    # the trade figures (orders.trade_figures), from nothing
    "entry_quantity",
    "entry_notional",
    "exit_quantity",
    "exit_notional",
    "fees",
    "exit_reason",
)


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """A broker-confirmed entry order and whose it is (for `lifecycle_persist_many`)."""

    broker_order: BrokerOrder
    account_id: int
    owner_id: int


def lifecycle_persist_many(
    *,
    orders: Sequence[Acknowledged],
    on_begin: Callable[[], None] | None = None,
    before_commit: Callable[[list[str]], None] | None = None,
) -> list[str]:
    """`lifecycle_persist` for the entry orders of several accounts, in one durable transaction.

    Per order the result is lifecycle_persist's: order row, position seed, intent
    handed over, audit event, trade event after commit. The common case (a pending
    intent, an order the broker took) is written set-based, one statement each: ledger
    locks, the intents handed over (which locks them), positions seeded (or the open
    one locked), orders, and every audit event of the transaction; any other case (an intent abandoned meanwhile, an order that ended
    on arrival) goes through lifecycle_persist's own steps in the same transaction.
    `on_begin` runs first, `before_commit` last with the client order ids persisted
    now; an order persisted before (adopted by reconciliation meanwhile) is not in it.
    Returns those client order ids.
    """
    persisted: list[str] = []
    # The ledger locks and the hand-over share a round trip, the writes after the
    # positions another (orders.round_trips); `on_begin`'s writes travel with the first.
    with transaction.atomic(durable=True), statements_batched(commit=True), audit_batch():
        if on_begin is not None:
            on_begin()
        by_cid = {ack.broker_order.client_order_id: ack for ack in orders}
        account_ids = [ack.account_id for ack in orders]
        lock = ledger_service.ledgers_lock_statement(account_ids=account_ids)
        hand_over = _entries_hand_over_statement(
            [cid for cid, ack in by_cid.items() if ack.broker_order.status not in ENDED_WITHOUT_FILLING]
        )
        statements = [statement for statement in (lock, hand_over) if statement is not None]
        results = fetch_together(statements) if statements else []
        ledger_service.ledgers_locked(account_ids=account_ids, rows=results[0] if lock is not None else [])
        simple = sorted(results[-1]) if hand_over is not None else []
        for row in simple:
            if row[2] != by_cid[row[1]].account_id:
                raise OrderIntent.DoesNotExist(f"intent {row[1]} is not account {by_cid[row[1]].account_id}'s")
        simple_cids = {row[1] for row in simple}
        for ack in orders:
            if ack.broker_order.client_order_id not in simple_cids:
                _, created = _persist_locked(
                    ack.broker_order, via_reconciliation=False, account_id=ack.account_id, owner_id=ack.owner_id
                )
                if created:
                    persisted.append(ack.broker_order.client_order_id)
        if simple:
            persisted.extend(_persist_entries(simple, by_cid))
            audit_record_many(
                [
                    {
                        "event": "entry.placed",
                        "account_id": row[2],
                        "strategy_id": row[3],
                        "client_order_id": row[1],
                        "message": f"exchange order {by_cid[row[1]].broker_order.exchange_order_id}",
                    }
                    for row in simple
                ]
            )
            push_trade_events_on_commit(
                [
                    (
                        by_cid[row[1]].owner_id,
                        {
                            "event": "order",
                            "account_id": row[2],
                            "client_order_id": row[1],
                            "intent": row[5],
                            "side": row[7],
                            "status": _order_status(by_cid[row[1]].broker_order),
                            "quantity": fixed_to_str(int(row[9])),
                            "filled_quantity": fixed_to_str(0),
                        },
                    )
                    for row in simple
                ]
            )
        if before_commit is not None:
            before_commit(persisted)
    return persisted


def _entries_hand_over_statement(cids: list[str]) -> tuple[str, list[Any]] | None:
    """Hand the pending entry intents of `cids` over (PLACED) in one statement that locks them and returns their rows.

    An intent not pending any more (placed or abandoned meanwhile) is not returned:
    lifecycle_persist's own steps handle it. None for no intent.
    """
    if not cids:
        return None
    where, params = any_of("client_order_id", cids)
    return (
        f"UPDATE {table(OrderIntent)} SET state = %s, updated_at = %s "
        f"WHERE {where} AND state = %s AND intent = %s "
        f"RETURNING id, client_order_id, account_id, strategy_id, instrument_id, intent, position_side, side, "
        f"order_type, quantity, price, reserved",
        [
            OrderIntent.State.PLACED,
            connection.ops.adapt_datetimefield_value(timezone.now()),
            *params,
            OrderIntent.State.PENDING,
            Intent.ENTRY,
        ],
    )


def _order_status(broker_order: BrokerOrder) -> str:
    return OrderStatus.NEW if broker_order.status == OrderStatus.NEW else OrderStatus.SUBMITTED


def _persist_entries(simple: list[tuple[Any, ...]], by_cid: Mapping[str, Acknowledged]) -> list[str]:
    """The set-based part of lifecycle_persist_many: positions seeded or found, then the orders."""
    now = timezone.now()
    seeds: dict[tuple[Any, Any, Any], tuple[Any, ...]] = {}
    for row in simple:
        seeds.setdefault(
            (row[2], row[4], row[3]),
            (row[2], row[3], row[4], row[6], 0, 0, 0, 0, Position.State.OPEN, now, 0, 0, 0, 0, 0, ""),
        )
    # A new position per (account, instrument, strategy), unless one is open already
    # (the partial unique index of open positions), which is then locked and used.
    positions = {
        (account_id, instrument_id, strategy_id): pk
        for pk, account_id, instrument_id, strategy_id in insert_rows(
            Position,
            _POSITION_COLUMNS,
            seeds.values(),
            suffix="ON CONFLICT (account_id, instrument_id, strategy_id) WHERE state = 'OPEN' DO NOTHING",
            returning=("id", "account_id", "instrument_id", "strategy_id"),
        )
    }
    for account_id, instrument_id, strategy_id in seeds:
        if (account_id, instrument_id, strategy_id) not in positions:
            positions[(account_id, instrument_id, strategy_id)] = (
                Position.objects.select_for_update()
                .filter(
                    account_id=account_id,
                    instrument_id=instrument_id,
                    strategy_id=strategy_id,
                    state=Position.State.OPEN,
                )
                .values_list("pk", flat=True)
                .get()
            )
    insert_rows_later(
        Order,
        _ORDER_COLUMNS,
        [
            (
                row[1],
                by_cid[row[1]].broker_order.exchange_order_id,
                row[0],
                row[2],
                row[3],
                row[4],
                positions[(row[2], row[4], row[3])],
                row[5],
                row[7],
                row[8],
                int(row[9]),
                int(row[10]),
                _order_status(by_cid[row[1]].broker_order),
                0,
                0,
                int(row[11]),
                0,
                False,
                now,
                now,
            )
            for row in simple
        ],
    )
    return [row[1] for row in simple]


def _persist_locked(
    broker_order: BrokerOrder, *, via_reconciliation: bool, account_id: int | None, owner_id: int | None
) -> tuple[Order, bool]:
    """lifecycle_persist's work inside the caller's transaction; returns (order, created now)."""
    if account_id is None:
        account_id = OrderIntent.objects.values_list("account_id", flat=True).get(
            client_order_id=broker_order.client_order_id
        )
    ledger = ledger_service.ledger_lock(account_id=account_id)
    intent = OrderIntent.objects.select_for_update().get(
        client_order_id=broker_order.client_order_id, account_id=account_id
    )
    # PLACED is set in the transaction that creates the order: the two go together.
    if intent.state == OrderIntent.State.PLACED:
        return Order.objects.get(client_order_id=broker_order.client_order_id), False
    reserved = intent.reserved
    if intent.state == OrderIntent.State.ABANDONED:
        # Abandoned too early (a slow broker outlived the lock); the order exists after
        # all, so it takes back its reservation, as far as capital allows.
        reserved = min(intent.reserved, max(ledger.available, 0))
        ledger_service.ledger_reserve(ledger=ledger, amount=reserved, client_order_id=intent.client_order_id)
    position = _position_for(intent)
    order = Order.objects.create(
        client_order_id=intent.client_order_id,
        exchange_order_id=broker_order.exchange_order_id,
        intent_row=intent,
        account_id=intent.account_id,
        strategy_id=intent.strategy_id,
        instrument_id=intent.instrument_id,
        position=position,
        intent=intent.intent,
        side=intent.side,
        order_type=intent.order_type,
        quantity=intent.quantity,
        price=intent.price,
        status=OrderStatus.NEW if broker_order.status == OrderStatus.NEW else OrderStatus.SUBMITTED,
        reserved=reserved,
        via_reconciliation=via_reconciliation,
    )
    intent.state = OrderIntent.State.PLACED
    intent.save(update_fields=["state", "updated_at"])
    audit_record(
        event="reconcile.adopt" if via_reconciliation else f"{intent.intent.lower()}.placed",
        account_id=intent.account_id,
        strategy_id=intent.strategy_id,
        client_order_id=intent.client_order_id,
        message=f"exchange order {broker_order.exchange_order_id}",
    )
    if broker_order.status in ENDED_WITHOUT_FILLING and broker_order.filled_quantity == 0:
        _end_order(ledger, order, broker_order.status, via_reconciliation=via_reconciliation)
    if owner_id is None:
        owner_id = Account.objects.values_list("owner_id", flat=True).get(pk=order.account_id)
    push_trade_event_on_commit(owner_id, _event(order, "order"))
    return order, True


def _position_for(intent: OrderIntent) -> Position:
    open_position = (
        Position.objects.select_for_update()  # type: ignore[misc]
        .filter(
            account_id=intent.account_id,
            instrument_id=intent.instrument_id,
            strategy_id=intent.strategy_id,
            state=Position.State.OPEN,
        )
        .first()
    )
    if open_position is not None:
        return open_position
    if intent.intent == Intent.EXIT:
        # The position closed meanwhile (a reconciliation found the exit late): attach
        # the order to the position it was meant to close.
        last = (
            Position.objects.filter(  # type: ignore[misc]
                account_id=intent.account_id, instrument_id=intent.instrument_id, strategy_id=intent.strategy_id
            )
            .order_by("-id")
            .first()
        )
        if last is not None:
            return last
    return Position.objects.create(
        account_id=intent.account_id,
        instrument_id=intent.instrument_id,
        strategy_id=intent.strategy_id,
        side=intent.position_side,
    )


def _multiplier(instrument_id: int) -> int:
    value = Instrument.objects.values_list("contract_multiplier", flat=True).get(pk=instrument_id)
    return fixed_from_decimal(value)


def lifecycle_apply_fill(*, account_id: int, fill: BrokerFill, via_reconciliation: bool = False) -> bool:
    """Apply one broker fill (entry fill or exit fill handler); False when unknown order or already applied."""
    with transaction.atomic(durable=True):
        ledger = ledger_service.ledger_lock(account_id=account_id)
        order = (
            Order.objects.select_for_update()
            .filter(account_id=account_id, exchange_order_id=fill.exchange_order_id)
            .first()
        )
        if (
            order is None
            or Fill.objects.filter(account_id=account_id, exchange_trade_id=fill.exchange_trade_id).exists()
        ):
            return False
        position = Position.objects.select_for_update().get(pk=order.position_id)
        quantity = min(fill.quantity, order.quantity - order.filled_quantity)
        if quantity <= 0:
            return False
        Fill.objects.create(
            account_id=account_id,
            order=order,
            exchange_trade_id=fill.exchange_trade_id,
            quantity=quantity,
            price=fill.price,
            fee=fill.fee,
            ts_event=fill.ts_event,
            via_reconciliation=via_reconciliation,
        )
        value = notional(quantity, fill.price, _multiplier(order.instrument_id))
        if order.intent == Intent.ENTRY:
            _entry_fill(ledger, order, position, quantity, value, fill)
        else:
            _exit_fill(ledger, order, position, quantity, value, fill, via_reconciliation=via_reconciliation)
        order.filled_quantity += quantity
        order.filled_notional += value
        if order.status not in TERMINAL_STATUSES:
            order.status = (
                OrderStatus.FILLED if order.filled_quantity == order.quantity else OrderStatus.PARTIALLY_FILLED
            )
        order.save(
            update_fields=["filled_quantity", "filled_notional", "status", "reserved", "reserve_released", "updated_at"]
        )
        audit_record(
            event=f"{order.intent.lower()}.fill",
            account_id=account_id,
            strategy_id=order.strategy_id,
            client_order_id=order.client_order_id,
            message=f"{fixed_to_str(quantity)} @ {fixed_to_str(fill.price)}",
            details={"trade_id": fill.exchange_trade_id, "via_reconciliation": via_reconciliation},
        )
        owner_id = Account.objects.values_list("owner_id", flat=True).get(pk=account_id)
        push_trade_event_on_commit(
            owner_id, _event(order, "fill", price=fixed_to_str(fill.price), fill_quantity=fixed_to_str(quantity))
        )
    return True


def _entry_fill(
    ledger: CapitalLedger, order: Order, position: Position, quantity: int, value: int, fill: BrokerFill
) -> None:
    total = order.reserved + order.reserve_released
    after = order.filled_quantity + quantity
    release = pro_rata(total, after, order.quantity) - pro_rata(total, order.filled_quantity, order.quantity)
    release = min(release, order.reserved)  # a fill after a cancel has nothing left to release
    effect = ledger_service.ledger_entry_fill(
        ledger=ledger,
        release=release,
        cost=value,
        fee=fill.fee,
        client_order_id=order.client_order_id,
        exchange_trade_id=fill.exchange_trade_id,
    )
    order.reserved -= release
    order.reserve_released += release
    position.quantity += quantity
    position.cost += value
    position.locked += effect.locked
    position.realized_pnl -= fill.fee
    if position.state == Position.State.CLOSED:
        position.state = Position.State.OPEN
        position.closed_at = None
    figures = figures_add_entry(position, quantity=quantity, value=value, fee=fill.fee, ts_event=fill.ts_event)
    position.save(update_fields=["quantity", "cost", "locked", "realized_pnl", "state", "closed_at", *figures])


def _exit_fill(
    ledger: CapitalLedger,
    order: Order,
    position: Position,
    quantity: int,
    value: int,
    fill: BrokerFill,
    *,
    via_reconciliation: bool,
) -> None:
    held = position.quantity
    closing = min(quantity, held)
    if closing <= 0:
        unlock, cost_share = 0, 0
    else:
        unlock = pro_rata(position.locked, closing, held)
        cost_share = pro_rata(position.cost, closing, held)
    proceeds = notional(closing, fill.price, _multiplier(order.instrument_id)) if closing else 0
    gross = proceeds - cost_share if position.side == PositionSide.LONG else cost_share - proceeds
    pnl = gross - fill.fee
    ledger_service.ledger_exit_fill(
        ledger=ledger,
        unlock=unlock,
        pnl=pnl,
        client_order_id=order.client_order_id,
        exchange_trade_id=fill.exchange_trade_id,
    )
    position.quantity -= closing
    position.cost -= cost_share
    position.locked -= unlock
    position.realized_pnl += pnl
    if position.quantity == 0:
        position.state = Position.State.CLOSED
        position.closed_at = timezone.now()
    reason = (
        exit_reason(intent_row_id=order.intent_row_id, via_reconciliation=via_reconciliation)
        if not position.quantity
        else ""
    )
    figures = figures_add_exit(
        position, closing=closing, proceeds=proceeds, fee=fill.fee, ts_event=fill.ts_event, reason=reason
    )
    position.save(update_fields=["quantity", "cost", "locked", "realized_pnl", "state", "closed_at", *figures])


def lifecycle_order_update(*, account_id: int, broker_order: BrokerOrder, via_reconciliation: bool = False) -> bool:
    """Apply a broker status that is not a fill: working (NEW -> SUBMITTED) or ended (cancel handler).

    An ended status releases exactly the unfilled reservation. Callers apply the
    order's fills first; FILLED itself is reached through fills only.
    """
    with transaction.atomic(durable=True):
        ledger = ledger_service.ledger_lock(account_id=account_id)
        order = Order.objects.select_for_update().filter(client_order_id=broker_order.client_order_id).first()
        if order is None or order.account_id != account_id or order.is_terminal:
            return False
        if broker_order.status in ENDED_WITHOUT_FILLING:
            _end_order(ledger, order, broker_order.status, via_reconciliation=via_reconciliation)
        elif (
            broker_order.status in (OrderStatus.SUBMITTED, OrderStatus.PARTIALLY_FILLED)
            and order.status == OrderStatus.NEW
        ):
            order.status = OrderStatus.SUBMITTED
            order.save(update_fields=["status", "updated_at"])
        else:
            return False
        owner_id = Account.objects.values_list("owner_id", flat=True).get(pk=account_id)
        push_trade_event_on_commit(owner_id, _event(order, "order"))
    return True


def _end_order(ledger: CapitalLedger, order: Order, status: str, *, via_reconciliation: bool) -> None:
    unfilled = order.reserved
    ledger_service.ledger_release(
        ledger=ledger, amount=unfilled, client_order_id=order.client_order_id, reason=f"order {status.lower()}"
    )
    order.reserve_released += order.reserved
    order.reserved = 0
    order.status = status
    order.save(update_fields=["status", "reserved", "reserve_released", "updated_at"])
    position = Position.objects.select_for_update().get(pk=order.position_id)
    if order.intent == Intent.ENTRY and position.state == Position.State.OPEN and position.quantity == 0:
        still_working = position.orders.exclude(pk=order.pk).exclude(status__in=TERMINAL_STATUSES).exists()
        if not still_working:
            position.state = Position.State.CLOSED
            position.closed_at = timezone.now()
            position.save(update_fields=["state", "closed_at"])
    audit_record(
        event="reconcile.cancel" if via_reconciliation else f"{order.intent.lower()}.{status.lower()}",
        account_id=order.account_id,
        strategy_id=order.strategy_id,
        client_order_id=order.client_order_id,
        message=f"unfilled reservation {fixed_to_str(unfilled)} released",
    )
