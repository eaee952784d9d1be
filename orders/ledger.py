"""The ledger service: the only writer of CapitalLedger, every change journaled.

Each function changes the ledger row and appends one LedgerEntry with the same
deltas, so the journal sums to the ledger at every commit. Callers hold the ledger row
lock: take it with `ledger_lock` inside `transaction.atomic()` before anything else of
the account (lock order: ledger, then intent/order, then position). On SQLite
`select_for_update` is a no-op and IMMEDIATE transactions serialize writers instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from orders.metrics import CAPITAL_INVARIANT_VIOLATIONS
from orders.models import Account, CapitalLedger, LedgerEntry
from orders.round_trips import execute_later
from orders.rows import any_of, for_update, insert_rows, insert_rows_later, placeholders, table

log = logging.getLogger(__name__)
Kind = LedgerEntry.Kind


class InsufficientCapital(Exception):
    """A reservation larger than the account's available capital."""

    def __init__(self, account_id: int, needed: int, available: int) -> None:
        super().__init__(f"account {account_id}: needs {needed} (fixed point), {available} available")
        self.needed = needed
        self.available = available


def ledger_open(*, account: Account) -> CapitalLedger:
    """Create the account's ledger from its allocated capital, if it has none yet."""
    from feeds.market import fixed_from_decimal

    with transaction.atomic():
        ledger, created = CapitalLedger.objects.get_or_create(account=account)
        if created and account.allocated_capital:
            _apply(
                ledger,
                Kind.ALLOCATE,
                delta_allocated=fixed_from_decimal(account.allocated_capital),
                reason="opening allocation",
            )
    return ledger


def ledger_lock(*, account_id: int) -> CapitalLedger:
    """Return the account's ledger row, locked until the transaction ends. Needs an open transaction."""
    return CapitalLedger.objects.select_for_update().get(account_id=account_id)


def _apply(
    ledger: CapitalLedger,
    kind: str,
    *,
    delta_allocated: int = 0,
    delta_reserved_for_orders: int = 0,
    delta_reserved_for_positions: int = 0,
    delta_realized_pnl: int = 0,
    client_order_id: str = "",
    exchange_trade_id: str = "",
    reason: str = "",
) -> LedgerEntry:
    ledger.allocated_capital += delta_allocated
    ledger.reserved_for_orders += delta_reserved_for_orders
    ledger.reserved_for_positions += delta_reserved_for_positions
    ledger.realized_pnl += delta_realized_pnl
    ledger.save(
        update_fields=[
            "allocated_capital",
            "reserved_for_orders",
            "reserved_for_positions",
            "realized_pnl",
            "updated_at",
        ]
    )
    return LedgerEntry.objects.create(
        account_id=ledger.account_id,
        kind=kind,
        delta_allocated=delta_allocated,
        delta_reserved_for_orders=delta_reserved_for_orders,
        delta_reserved_for_positions=delta_reserved_for_positions,
        delta_realized_pnl=delta_realized_pnl,
        client_order_id=client_order_id,
        exchange_trade_id=exchange_trade_id,
        reason=reason[:200],
    )


def ledger_allocate(*, account_id: int, allocated_capital: int) -> CapitalLedger:
    """Set the allocation; refuses one that would leave `available` negative."""
    with transaction.atomic():
        ledger = ledger_lock(account_id=account_id)
        delta = allocated_capital - ledger.allocated_capital
        if ledger.available + delta < 0:
            raise InsufficientCapital(account_id, -delta, ledger.available)
        _apply(ledger, Kind.ALLOCATE, delta_allocated=delta, reason="allocation changed")
    return ledger


def ledger_reserve(*, ledger: CapitalLedger, amount: int, client_order_id: str) -> None:
    """Reserve `amount` for an order about to be placed. Needs the ledger lock."""
    if amount < 0:
        raise ValueError("a reservation cannot be negative")
    if amount > ledger.available:
        raise InsufficientCapital(ledger.account_id, amount, ledger.available)
    _apply(ledger, Kind.RESERVE, delta_reserved_for_orders=amount, client_order_id=client_order_id)


def ledger_release(*, ledger: CapitalLedger, amount: int, client_order_id: str, reason: str) -> None:
    """Release an order's unused reservation (cancel, reject, abandoned intent). Needs the ledger lock."""
    if amount:
        _apply(ledger, Kind.RELEASE, delta_reserved_for_orders=-amount, client_order_id=client_order_id, reason=reason)


@dataclass(frozen=True)
class EntryFillEffect:
    locked: int  # added to reserved_for_positions for this fill
    shortfall: int  # cost that did not fit in the account's capital (0 normally)


def ledger_entry_fill(
    *, ledger: CapitalLedger, release: int, cost: int, fee: int, client_order_id: str, exchange_trade_id: str
) -> EntryFillEffect:
    """Move an entry fill from order reservation to position reservation and charge its fee.

    `release` is the fill's share of the order's reservation, `cost` its notional. If a
    fill came in so far from the reserved price that cost and fee exceed what the
    account has, the position locks only what fits: the exchange's fill is a fact the
    ledger must absorb, and the constraint forbids a negative `available`. The shortfall
    is returned and counted as a capital invariant violation.
    """
    room = ledger.available + release
    charged_fee = min(fee, max(room, 0))
    locked = min(cost, max(room - charged_fee, 0))
    shortfall = (cost - locked) + (fee - charged_fee)
    _apply(
        ledger,
        Kind.ENTRY_FILL,
        delta_reserved_for_orders=-release,
        delta_reserved_for_positions=locked,
        delta_realized_pnl=-charged_fee,
        client_order_id=client_order_id,
        exchange_trade_id=exchange_trade_id,
        reason=f"fee {charged_fee}" + (f", shortfall {shortfall}" if shortfall else ""),
    )
    if shortfall:
        CAPITAL_INVARIANT_VIOLATIONS.inc()
        log.error("ledger account %s: entry fill %s short by %s", ledger.account_id, exchange_trade_id, shortfall)
    return EntryFillEffect(locked=locked, shortfall=shortfall)


def ledger_exit_fill(
    *, ledger: CapitalLedger, unlock: int, pnl: int, client_order_id: str, exchange_trade_id: str
) -> int:
    """Release an exit fill's share of the position reservation and realize its P&L (fee included).

    Returns the loss that could not be absorbed (0 normally): a short that lost more
    than the account holds cannot take `available` below zero in the ledger, so the
    excess is counted as a capital invariant violation and logged for an operator.
    """
    floor = -(ledger.available + unlock)
    realized = max(pnl, floor)
    unabsorbed = realized - pnl
    _apply(
        ledger,
        Kind.EXIT_FILL,
        delta_reserved_for_positions=-unlock,
        delta_realized_pnl=realized,
        client_order_id=client_order_id,
        exchange_trade_id=exchange_trade_id,
        reason=f"unabsorbed loss {unabsorbed}" if unabsorbed else "",
    )
    if unabsorbed:
        CAPITAL_INVARIANT_VIOLATIONS.inc()
        log.error(
            "ledger account %s: exit fill %s loss exceeds capital by %s",
            ledger.account_id,
            exchange_trade_id,
            unabsorbed,
        )
    return unabsorbed


@dataclass(frozen=True)
class InvariantReport:
    account_id: int
    ok: bool
    problems: tuple[str, ...]


def ledger_check(*, account_id: int) -> InvariantReport:
    """Check one account: journal sums equal the ledger, reservations match open orders and positions, nothing negative.

    Every read comes from one consistent snapshot. Trading writes the ledger and the
    intents/orders/positions of a change in one transaction, so reads spread over
    several statements would see half of a change (a reservation in the ledger and not
    yet its intent) and report a violation that never existed. On its own this runs in
    one REPEATABLE READ transaction on PostgreSQL (a single snapshot, no lock taken, so
    trading is not held up); inside a caller's transaction, whose isolation is already
    fixed, it takes the ledger row lock first, which every writer of the account takes
    before anything else. On SQLite a transaction is always one snapshot.
    """
    if connection.in_atomic_block:
        ledger_lock(account_id=account_id)
        return _ledger_check_snapshot(account_id)
    with transaction.atomic(durable=True):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return _ledger_check_snapshot(account_id)


def _ledger_check_snapshot(account_id: int) -> InvariantReport:
    from orders.models import Order, OrderIntent, Position

    ledger = CapitalLedger.objects.get(account_id=account_id)
    sums = LedgerEntry.objects.filter(account_id=account_id).aggregate(
        allocated=Sum("delta_allocated"),
        orders=Sum("delta_reserved_for_orders"),
        positions=Sum("delta_reserved_for_positions"),
        pnl=Sum("delta_realized_pnl"),
    )
    problems: list[str] = []
    for field, key in (
        ("allocated_capital", "allocated"),
        ("reserved_for_orders", "orders"),
        ("reserved_for_positions", "positions"),
        ("realized_pnl", "pnl"),
    ):
        if int(sums[key] or 0) != getattr(ledger, field):
            problems.append(f"{field} {getattr(ledger, field)} != journal {sums[key] or 0}")
    held_by_orders = int(Order.objects.filter(account_id=account_id).aggregate(s=Sum("reserved"))["s"] or 0)
    held_by_intents = int(
        OrderIntent.objects.filter(account_id=account_id, state=OrderIntent.State.PENDING).aggregate(s=Sum("reserved"))[
            "s"
        ]
        or 0
    )
    if held_by_orders + held_by_intents != ledger.reserved_for_orders:
        problems.append(
            f"reserved_for_orders {ledger.reserved_for_orders} != orders {held_by_orders} + pending intents {held_by_intents}"
        )
    locked = int(
        Position.objects.filter(account_id=account_id, state=Position.State.OPEN).aggregate(s=Sum("locked"))["s"] or 0
    )
    if locked != ledger.reserved_for_positions:
        problems.append(f"reserved_for_positions {ledger.reserved_for_positions} != open positions {locked}")
    if ledger.available < 0:
        problems.append(f"available {ledger.available} < 0")
    if problems:
        CAPITAL_INVARIANT_VIOLATIONS.inc()
    return InvariantReport(account_id, not problems, tuple(problems))


def ledgers_lock(*, account_ids: Sequence[int]) -> dict[int, int]:
    """Lock the ledger rows of `account_ids` (in account order) and return each one's `available`.

    One statement for every account of a signal; an account without a ledger yet gets
    it opened from its allocation first. Needs an open transaction, like `ledger_lock`.
    """
    statement = ledgers_lock_statement(account_ids=account_ids)
    if statement is None:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        rows = cursor.fetchall()
    return ledgers_locked(account_ids=account_ids, rows=rows)


def ledgers_lock_statement(*, account_ids: Sequence[int]) -> tuple[str, list[Any]] | None:
    """The statement of `ledgers_lock`, to send with others (orders.round_trips.fetch_together); None for no account.

    Its rows go to `ledgers_locked`, which opens a missing ledger.
    """
    ordered = sorted(set(account_ids))
    if not ordered:
        return None
    accounts, params = any_of("account_id", ordered)
    sql = (
        f"SELECT account_id, allocated_capital - reserved_for_orders - reserved_for_positions + realized_pnl "
        f"FROM {table(CapitalLedger)} WHERE {accounts} ORDER BY account_id{for_update()}"
    )
    return sql, params


def ledgers_locked(*, account_ids: Sequence[int], rows: Sequence[tuple[Any, ...]]) -> dict[int, int]:
    """`available` per account from the rows of `ledgers_lock_statement`; a missing ledger is opened and locked now."""
    available = {account_id: int(value) for account_id, value in rows}
    for account_id in sorted(set(account_ids)):
        if account_id not in available:
            ledger_open(account=Account.objects.get(pk=account_id))
            available[account_id] = ledger_lock(account_id=account_id).available
    return available


def ledgers_reserve_checked(*, reservations: Sequence[tuple[int, int, str]]) -> None:
    """Reserve (account, amount, client order id) on ledgers locked and checked by the caller: one update, one journal insert.

    An account may have several reservations (their sum checked by the caller).

    For amounts the caller compared with `available` read under the same locks (which
    nothing else can change meanwhile), so no answer is needed and both statements
    travel with the transaction's next round trip (orders.round_trips). Should a
    reservation not fit after all, the ledger's CHECK constraint (available never
    negative) fails the statement and with it the transaction: nothing is reserved.
    """
    if not reservations:
        return
    if any(amount < 0 for _, amount, _ in reservations):
        raise ValueError("a reservation cannot be negative")
    # Several reservations of one account (entries on different instruments) are one
    # change of its row; each keeps its own journal entry.
    totals: dict[int, int] = {}
    for account_id, amount, _ in reservations:
        totals[account_id] = totals.get(account_id, 0) + amount
    accounts = list(totals)
    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    ledger = table(CapitalLedger)
    if connection.vendor == "postgresql":
        sql = (
            f"UPDATE {ledger} SET reserved_for_orders = {ledger}.reserved_for_orders + v.amount, updated_at = %s "
            f"FROM unnest(%s::bigint[], %s::numeric(38,0)[]) AS v(account_id, amount) "
            f"WHERE {ledger}.account_id = v.account_id"
        )
        params: list[Any] = [stamp, accounts, list(totals.values())]
    else:
        amount_case = "CASE account_id " + " ".join(["WHEN %s THEN %s"] * len(totals)) + " END"
        case_params: list[Any] = []
        for account_id, amount in totals.items():
            case_params += [account_id, amount]
        sql = (
            f"UPDATE {ledger} SET reserved_for_orders = reserved_for_orders + {amount_case}, updated_at = %s "
            f"WHERE account_id IN ({placeholders(len(accounts))})"
        )
        params = [*case_params, stamp, *accounts]
    execute_later(sql, params)
    insert_rows_later(
        LedgerEntry,
        _ENTRY_COLUMNS,
        [
            (account_id, Kind.RESERVE, 0, amount, 0, 0, client_order_id, "", "", now)
            for account_id, amount, client_order_id in reservations
        ],
    )


def ledgers_reserve(*, reservations: Sequence[tuple[int, int, str]]) -> set[int]:
    """Reserve (account, amount, client order id) on several locked ledgers in one statement; return the accounts reserved.

    The UPDATE carries the condition itself (available >= amount), so a reservation that
    does not fit is never made, whatever the caller read before; each one made is
    journaled (one multi-row insert). At most one reservation per account.
    """
    if not reservations:
        return set()
    accounts = [account_id for account_id, _, _ in reservations]
    if len(set(accounts)) != len(accounts):
        raise ValueError("one reservation per account and statement")
    if any(amount < 0 for _, amount, _ in reservations):
        raise ValueError("a reservation cannot be negative")
    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    ledger = table(CapitalLedger)
    fits = f"{ledger}.allocated_capital - {ledger}.reserved_for_orders - {ledger}.reserved_for_positions + {ledger}.realized_pnl"
    if connection.vendor == "postgresql":
        sql = (
            f"UPDATE {ledger} SET reserved_for_orders = {ledger}.reserved_for_orders + v.amount, updated_at = %s "
            f"FROM unnest(%s::bigint[], %s::numeric(38,0)[]) AS v(account_id, amount) "
            f"WHERE {ledger}.account_id = v.account_id AND {fits} >= v.amount RETURNING {ledger}.account_id"
        )
        params: list[Any] = [stamp, accounts, [amount for _, amount, _ in reservations]]
    else:
        amount_case = "CASE account_id " + " ".join(["WHEN %s THEN %s"] * len(reservations)) + " END"
        case_params: list[Any] = []
        for account_id, amount, _ in reservations:
            case_params += [account_id, amount]
        sql = (
            f"UPDATE {ledger} SET reserved_for_orders = reserved_for_orders + {amount_case}, updated_at = %s "
            f"WHERE account_id IN ({placeholders(len(accounts))}) AND {fits} >= {amount_case} RETURNING account_id"
        )
        params = [*case_params, stamp, *accounts, *case_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        reserved = {row[0] for row in cursor.fetchall()}
    insert_rows(
        LedgerEntry,
        _ENTRY_COLUMNS,
        [
            (account_id, Kind.RESERVE, 0, amount, 0, 0, client_order_id, "", "", now)
            for account_id, amount, client_order_id in reservations
            if account_id in reserved
        ],
    )
    return reserved


_ENTRY_COLUMNS = (
    "account_id",
    "kind",
    "delta_allocated",
    "delta_reserved_for_orders",
    "delta_reserved_for_positions",
    "delta_realized_pnl",
    "client_order_id",
    "exchange_trade_id",
    "reason",
    "created_at",
)
