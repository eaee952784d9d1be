"""Reads of the orders app.

Pages, APIs and admin views build on the user-scoped reads; none of them takes an
account id without the user, so a user can never reach another's orders, positions,
ledger or audit. The trade executor's reads (below them) are the trading path's own:
they run inside its transactions, under the locks the executor holds, and are never
reached from a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeAlias

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from orders.models import (
    Account,
    AuditEvent,
    CapitalLedger,
    Fill,
    LedgerEntry,
    Order,
    OrderIntent,
    Position,
    SignalOutcome,
    TradeSetting,
)
from orders.models.accounts import Reversal
from orders.models.lifecycle import TERMINAL_STATUSES, Intent
from orders.round_trips import fetch_together
from orders.rows import any_of, table

AnyUser: TypeAlias = AbstractBaseUser | AnonymousUser


def accounts_for_user(user: AnyUser) -> QuerySet[Account]:
    if not user.is_authenticated:
        return Account.objects.none()
    return Account.objects.filter(owner_id=user.pk)


def orders_for_user(user: AnyUser) -> QuerySet[Order]:
    return Order.objects.filter(account__in=accounts_for_user(user)).select_related("instrument", "account")


def open_orders_for_user(user: AnyUser) -> QuerySet[Order]:
    return orders_for_user(user).exclude(status__in=["FILLED", "CANCELED", "REJECTED", "EXPIRED"])


def fills_for_user(user: AnyUser) -> QuerySet[Fill]:
    return Fill.objects.filter(account__in=accounts_for_user(user)).select_related("order")


def positions_for_user(user: AnyUser, *, open_only: bool = False) -> QuerySet[Position]:
    positions = Position.objects.filter(account__in=accounts_for_user(user)).select_related("instrument", "account")
    return positions.filter(state=Position.State.OPEN) if open_only else positions


def ledgers_for_user(user: AnyUser) -> QuerySet[CapitalLedger]:
    return CapitalLedger.objects.filter(account__in=accounts_for_user(user)).select_related("account")


def ledger_entries_for_user(user: AnyUser) -> QuerySet[LedgerEntry]:
    return LedgerEntry.objects.filter(account__in=accounts_for_user(user))


def audit_events_for_user(user: AnyUser) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(account__in=accounts_for_user(user))


def order_for_user(user: AnyUser, order_id: int) -> Order:
    """Return one of the user's orders; Order.DoesNotExist (a 404) for anyone else's."""
    return orders_for_user(user).get(pk=order_id)


def signal_outcomes_for_user(user: AnyUser) -> QuerySet[SignalOutcome]:
    """Outcomes on the user's accounts, and unrouted ones (no account) of strategies trading on them."""
    if not user.is_authenticated:
        return SignalOutcome.objects.none()
    traded_strategies = TradeSetting.objects.filter(account__owner_id=user.pk).values("strategy_id")
    return SignalOutcome.objects.filter(
        Q(account__owner_id=user.pk) | Q(account__isnull=True, strategy_id__in=traded_strategies)
    )


# ---- the trade executor's reads ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingRow:
    """One enabled trade setting of a strategy with its account, on the signal's instrument."""

    account_id: int
    owner_id: int
    broker: str
    mode: str
    quantity: Decimal
    order_type: str
    account_name: str = ""


@dataclass(frozen=True, slots=True)
class InstrumentRow:
    id: int
    tick_size: Decimal
    lot_size: Decimal
    contract_multiplier: Decimal
    venue: str
    metadata_refreshed_at: datetime | None
    metadata_problem: str


def trade_settings_on_instrument(
    *, strategy_id: int, feed: str, venue_symbol: str
) -> tuple[InstrumentRow | None, list[SettingRow]]:
    """The instrument a signal names and the enabled trade settings of its strategy (in account order): one statement.

    No instrument (or no setting) gives (None, []). Decimals are read as text, which
    both databases render exactly as they store them.
    """
    with connection.cursor() as cursor:
        cursor.execute(*_settings_statement(strategy_id=strategy_id, feed=feed, venue_symbol=venue_symbol))
        return _settings_from_rows(cursor.fetchall())


def trade_settings_on_instruments(
    keys: Sequence[tuple[int, str, str]],
) -> list[tuple[InstrumentRow | None, list[SettingRow]]]:
    """`trade_settings_on_instrument` for several (strategy id, feed, venue symbol): one statement on PostgreSQL.

    PostgreSQL reads every key in one set-based statement (the keys as arrays, each row
    tagged with its key's position), planned once however many signals a batch holds;
    SQLite runs the one-key statement per key.
    """
    if not keys:
        return []
    if connection.vendor != "postgresql":
        statements = [
            _settings_statement(strategy_id=strategy_id, feed=feed, venue_symbol=symbol)
            for strategy_id, feed, symbol in keys
        ]
        return [_settings_from_rows(rows) for rows in fetch_together(statements)]
    from feeds.models import Feed, Instrument

    sql = (
        f"SELECT k.n, i.id, CAST(i.tick_size AS TEXT), CAST(i.lot_size AS TEXT), "
        f"CAST(i.contract_multiplier AS TEXT), f.venue, i.metadata_refreshed_at, i.metadata_problem, "
        f"s.account_id, a.owner_id, a.broker, s.mode, CAST(s.quantity AS TEXT), s.order_type, a.name "
        f"FROM unnest(CAST(%s AS bigint[]), CAST(%s AS text[]), CAST(%s AS text[])) WITH ORDINALITY "
        f"AS k(strategy_id, feed, venue_symbol, n) "
        f"JOIN {table(TradeSetting)} s ON s.strategy_id = k.strategy_id AND s.enabled = %s "
        f"JOIN {table(Account)} a ON a.id = s.account_id "
        f"JOIN {table(Instrument)} i ON i.venue_symbol = k.venue_symbol "
        f"JOIN {table(Feed)} f ON f.id = i.feed_id AND f.name = k.feed "
        f"ORDER BY k.n, s.account_id, i.id"
    )
    params: list[Any] = [[key[0] for key in keys], [key[1] for key in keys], [key[2] for key in keys], True]
    by_key: list[list[tuple[Any, ...]]] = [[] for _ in keys]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for row in cursor.fetchall():
            by_key[row[0] - 1].append(row[1:])
    return [_settings_from_rows(rows) for rows in by_key]


def _settings_statement(*, strategy_id: int, feed: str, venue_symbol: str) -> tuple[str, list[Any]]:
    from feeds.models import Feed, Instrument

    sql = (
        f"SELECT i.id, CAST(i.tick_size AS TEXT), CAST(i.lot_size AS TEXT), CAST(i.contract_multiplier AS TEXT), "
        f"f.venue, i.metadata_refreshed_at, i.metadata_problem, "
        f"s.account_id, a.owner_id, a.broker, s.mode, CAST(s.quantity AS TEXT), s.order_type, a.name "
        f"FROM {table(TradeSetting)} s JOIN {table(Account)} a ON a.id = s.account_id "
        f"JOIN {table(Instrument)} i ON i.venue_symbol = %s JOIN {table(Feed)} f ON f.id = i.feed_id AND f.name = %s "
        f"WHERE s.strategy_id = %s AND s.enabled = %s ORDER BY s.account_id, i.id"
    )
    return sql, [venue_symbol, feed, strategy_id, True]


def _settings_from_rows(rows: Sequence[tuple[Any, ...]]) -> tuple[InstrumentRow | None, list[SettingRow]]:
    if not rows:
        return None, []
    first = rows[0]
    instrument = InstrumentRow(
        id=first[0],
        tick_size=Decimal(first[1]),
        lot_size=Decimal(first[2]),
        contract_multiplier=Decimal(first[3]),
        venue=first[4],
        metadata_refreshed_at=_aware(first[5]),
        metadata_problem=first[6] or "",
    )
    settings = [
        SettingRow(
            account_id=row[7],
            owner_id=row[8],
            broker=row[9],
            mode=row[10],
            quantity=Decimal(row[11]),
            order_type=row[12],
            account_name=row[13],
        )
        for row in rows
        if row[0] == instrument.id
    ]
    return instrument, settings


def _aware(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if timezone.is_naive(value):  # SQLite stores UTC without its offset
        value = value.replace(tzinfo=UTC)
    return value


@dataclass(frozen=True, slots=True)
class OpenPosition:
    id: int
    strategy_id: int | None
    side: str


@dataclass(frozen=True, slots=True)
class EntryState:
    """What an entry on (account, instrument) is checked against, read under the account's ledger lock."""

    duplicate: bool  # this signal already has its intent (its client order id exists)
    position: OpenPosition | None  # the open position here (the oldest), whatever the strategy
    pending_entry: str | None  # the client order id of a pending entry intent here


def entry_states(entries: Sequence[tuple[str, int, int]]) -> dict[str, EntryState]:
    """EntryState per client order id of `entries` ((client order id, account, instrument)): one statement for all.

    Run after the ledger row locks are taken, as its own statement: a statement started
    before a lock was granted would read a snapshot from before the entry that held it.
    """
    statement = entry_states_statement(entries)
    if statement is None:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        rows = cursor.fetchall()
    return entry_states_from_rows(entries, rows)


def entry_states_statement(entries: Sequence[tuple[str, int, int]]) -> tuple[str, list[Any]] | None:
    """The statement of `entry_states`, to send after the lock statement in the same round trip; None for no entry.

    Its rows go to `entry_states_from_rows`.
    """
    if not entries:
        return None
    cids, cid_params = any_of("client_order_id", [cid for cid, _, _ in entries])
    accounts, account_params = any_of("account_id", sorted({account_id for _, account_id, _ in entries}))
    instruments, instrument_params = any_of("instrument_id", sorted({instrument_id for _, _, instrument_id in entries}))
    intents, positions = table(OrderIntent), table(Position)
    sql = (
        f"SELECT 'd', account_id, instrument_id, id, NULL, NULL, client_order_id FROM {intents} WHERE {cids} "
        f"UNION ALL SELECT 'p', account_id, instrument_id, id, strategy_id, side, NULL FROM {positions} "
        f"WHERE state = %s AND {accounts} AND {instruments} "
        f"UNION ALL SELECT 'i', account_id, instrument_id, id, NULL, NULL, client_order_id FROM {intents} "
        f"WHERE intent = %s AND state = %s AND {accounts} AND {instruments}"
    )
    params = [
        *cid_params,
        Position.State.OPEN,
        *account_params,
        *instrument_params,
        Intent.ENTRY,
        OrderIntent.State.PENDING,
        *account_params,
        *instrument_params,
    ]
    return sql, params


def entry_states_from_rows(
    entries: Sequence[tuple[str, int, int]], rows: Sequence[tuple[Any, ...]]
) -> dict[str, EntryState]:
    """EntryState per client order id of `entries`, from the rows of `entry_states_statement`."""
    duplicates: set[str] = set()
    open_positions: dict[tuple[int, int], tuple[int, OpenPosition]] = {}
    pending: dict[tuple[int, int], tuple[int, str]] = {}
    for kind, account_id, instrument_id, row_id, strategy_id, side, cid in rows:
        where = (account_id, instrument_id)
        if kind == "d":
            duplicates.add(cid)
        elif kind == "p":
            if where not in open_positions or row_id < open_positions[where][0]:
                open_positions[where] = (row_id, OpenPosition(row_id, strategy_id, side))
        elif where not in pending or row_id < pending[where][0]:
            pending[where] = (row_id, cid)
    states = {}
    for cid, account_id, instrument_id in entries:
        where = (account_id, instrument_id)
        position = open_positions.get(where)
        intent = pending.get(where)
        states[cid] = EntryState(
            duplicate=cid in duplicates,
            position=position[1] if position else None,
            pending_entry=intent[1] if intent else None,
        )
    return states


def exit_working(*, account_id: int, instrument_id: int, position: OpenPosition) -> bool:
    """Whether the position has a working exit order or a pending exit intent."""
    if Order.objects.filter(position_id=position.id, intent=Intent.EXIT).exclude(status__in=TERMINAL_STATUSES).exists():
        return True
    return OrderIntent.objects.filter(  # type: ignore[misc]  # the stubs refuse None for a nullable FK's lookup
        account_id=account_id,
        instrument_id=instrument_id,
        strategy_id=position.strategy_id,
        position_side=position.side,
        intent=Intent.EXIT,
        state=OrderIntent.State.PENDING,
    ).exists()


def reversal_choice(*, strategy_id: int | None, account_id: int) -> str:
    """What the trade setting says an entry does while its own opposite position's exit works."""
    return (
        TradeSetting.objects.filter(strategy_id=strategy_id, account_id=account_id)  # type: ignore[misc]  # nullable FK lookup
        .values_list("reversal", flat=True)
        .first()
    ) or Reversal.AFTER_EXIT_FILL


def position_closed(position_id: int) -> bool:
    return Position.objects.filter(pk=position_id, state=Position.State.CLOSED).exists()


def working_entries(*, account_id: int, instrument_id: int, strategy_id: int, position_side: str) -> list[Order]:
    """The entry orders still working on the strategy's open position of this side."""
    return list(
        Order.objects.filter(
            account_id=account_id,
            instrument_id=instrument_id,
            strategy_id=strategy_id,
            intent=Intent.ENTRY,
            position__side=position_side,
            position__state=Position.State.OPEN,
        ).exclude(status__in=TERMINAL_STATUSES)
    )
