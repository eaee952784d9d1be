"""Reconciliation: a pure diff of the database against the broker, applied through the lifecycle handlers.

Per account, under the account's reconcile lease: read the pending intents and working
orders, ask the broker for its open orders, for every order we are unsure of, and for
recent fills; `diff` turns the two views into corrections; each correction goes
through the same handler the live path uses (never a raw status patch). Then the net
position per symbol is compared with the broker's (orders.exposure): a missed fill is
applied, any other difference is raised to an operator. Each broker read degrades on
its own: a venue that cannot list orders is asked by client id, and an intent no read
resolves is marked unresolved and, past a limit, put to a person (orders.resolution).
The same pass runs at startup before trading resumes (restart rebuild) and once more
at a clean stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from channels.db import database_sync_to_async
from django.utils import timezone

from core.fixed_point import fixed_to_str
from orders import lifecycle
from orders.audit import audit_record
from orders.brokers.base import Broker, BrokerError, BrokerFill, BrokerOrder, OrderNotFound
from orders.client_ids import client_id_prefix
from orders.exposure import ExposureMismatch, exposure_diff, site_exposure
from orders.ledger import ledger_check
from orders.locks import RECONCILE_SCOPE, entry_scope, lock_acquire, lock_release, new_owner_token
from orders.metrics import (
    RECONCILIATION_AWAITING_DECISION,
    RECONCILIATION_DEGRADED_STEPS,
    RECONCILIATION_EXPOSURE_MISMATCHES,
    RECONCILIATION_LAST_RUN,
    RECONCILIATION_MISMATCHES,
    RECONCILIATION_MISSING_AT_BROKER,
    RECONCILIATION_MISSING_IN_DB,
)
from orders.models import Account, Fill, Order, OrderIntent
from orders.models.lifecycle import TERMINAL_STATUSES, OrderStatus
from orders.models.outcomes import Outcome
from orders.outcomes import signal_outcome_settle
from orders.resolution import AwaitingDecision, intents_awaiting_decision, intents_unresolved_record

log = logging.getLogger(__name__)

ENDED = frozenset({OrderStatus.CANCELED, OrderStatus.REJECTED, OrderStatus.EXPIRED})
FILL_LOOKBACK = timedelta(minutes=5)


# ---- the two views ------------------------------------------------------------------


@dataclass(frozen=True)
class LocalOrder:
    client_order_id: str
    exchange_order_id: str
    status: str
    filled_quantity: int


@dataclass(frozen=True)
class LocalState:
    """What the database says about one account."""

    account_id: int
    prefix: str  # our client-id prefix for this account
    pending_intents: tuple[str, ...]  # client ids whose entry lock reconciliation holds
    working: tuple[LocalOrder, ...]  # orders not terminal
    known_trade_ids: frozenset[str]
    known_client_ids: frozenset[str]  # every intent of the account, whatever its state


@dataclass(frozen=True)
class VenueReport:
    """What the broker says: open orders, the orders asked for by id, recent fills."""

    open_orders: tuple[BrokerOrder, ...]
    looked_up: dict[str, BrokerOrder | None]  # client id -> order, None = the broker never had it
    fills: tuple[BrokerFill, ...]


# ---- corrections --------------------------------------------------------------------


@dataclass(frozen=True)
class Adopt:
    """An intent whose order exists at the broker: persist its lifecycle (crash after place)."""

    order: BrokerOrder


@dataclass(frozen=True)
class Abandon:
    """An intent the broker never received: release its reservation (crash before place)."""

    client_order_id: str


@dataclass(frozen=True)
class ApplyFill:
    fill: BrokerFill


@dataclass(frozen=True)
class UpdateStatus:
    """An order that ended (cancel handler) or started working at the broker."""

    order: BrokerOrder


@dataclass(frozen=True)
class CancelForeign:
    """An order with our prefix and no intent at all: not ours to keep; cancel it at the broker."""

    order: BrokerOrder


@dataclass(frozen=True)
class MissingAtBroker:
    """A working order the broker does not know: reported, never guessed at."""

    client_order_id: str


Correction = Adopt | Abandon | ApplyFill | UpdateStatus | CancelForeign | MissingAtBroker


def diff(local: LocalState, venue: VenueReport) -> list[Correction]:
    """Return the corrections that bring `local` to the broker's truth, in the order to apply them.

    Pure. Adoptions come first (their fills need the order row), then fills, then
    status changes, whose ended states release only what fills did not consume.
    """
    adopt: list[Correction] = []
    abandon: list[Correction] = []
    for client_id in local.pending_intents:
        report = venue.looked_up.get(client_id, _absent)
        if report is _absent:
            continue  # not asked this pass
        if report is None:
            abandon.append(Abandon(client_id))
        else:
            adopt.append(Adopt(report))  # type: ignore[arg-type]
    ours: dict[str, BrokerOrder] = {}
    for order in venue.open_orders:
        ours[order.client_order_id] = order
    for client_id, looked in venue.looked_up.items():
        if looked is not None:
            ours.setdefault(client_id, looked)
    known = local.known_client_ids | {o.client_order_id for o in local.working} | set(local.pending_intents)
    foreign = [
        CancelForeign(order)
        for order in venue.open_orders
        if order.client_order_id.startswith(local.prefix) and order.client_order_id not in known
    ]
    exchange_ids = {o.exchange_order_id for o in local.working if o.exchange_order_id}
    exchange_ids |= {c.order.exchange_order_id for c in adopt if isinstance(c, Adopt)}
    fills: list[Correction] = [
        ApplyFill(fill)
        for fill in venue.fills
        if fill.exchange_order_id in exchange_ids and fill.exchange_trade_id not in local.known_trade_ids
    ]
    new_fill_qty: dict[str, int] = {}
    for correction in fills:
        assert isinstance(correction, ApplyFill)
        key = correction.fill.exchange_order_id
        new_fill_qty[key] = new_fill_qty.get(key, 0) + correction.fill.quantity
    statuses: list[Correction] = []
    missing: list[Correction] = []
    for mine in local.working:
        report = ours.get(mine.client_order_id)
        if report is None:
            if venue.looked_up.get(mine.client_order_id, _absent) is None:
                missing.append(MissingAtBroker(mine.client_order_id))
            continue
        filled_after = mine.filled_quantity + new_fill_qty.get(mine.exchange_order_id, 0)
        changed = report.status in ENDED or (mine.status == OrderStatus.NEW and report.status != OrderStatus.NEW)
        # An ended order whose fills are not all in yet waits a pass: releasing now would
        # release capital a late fill still needs.
        if changed and filled_after == report.filled_quantity:
            statuses.append(UpdateStatus(report))
    for correction in adopt:
        assert isinstance(correction, Adopt)
        if correction.order.status in ENDED:
            filled_after = new_fill_qty.get(correction.order.exchange_order_id, 0)
            if filled_after == correction.order.filled_quantity:
                statuses.append(UpdateStatus(correction.order))
    return [*adopt, *fills, *statuses, *abandon, *foreign, *missing]


_absent = object()


# ---- the pass -----------------------------------------------------------------------

# A missed fill explains an exposure difference only if the broker still lists it; a
# day covers every venue's trade history endpoint (Upstox serves only today's trades).
EXPOSURE_FILL_LOOKBACK = timedelta(hours=24)
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class ReconcileResult:
    account_id: int
    skipped: str = ""
    corrections: dict[str, int] = field(default_factory=dict)
    invariant_problems: tuple[str, ...] = ()
    # Broker reads this pass went without (step -> why); each step degrades on its own.
    degraded_steps: dict[str, str] = field(default_factory=dict)
    exposure_mismatches: tuple[ExposureMismatch, ...] = ()
    # Pending intents no broker read could resolve this pass.
    unresolved: tuple[str, ...] = ()
    # Pending intents a person was asked to decide on (this pass or earlier).
    awaiting_decision: tuple[AwaitingDecision, ...] = ()
    # The accounts whose combined exposure this pass compared (several on a shared venue key).
    exposure_accounts: tuple[int, ...] = ()

    def halt_reason(self) -> str:
        """Why entries on this account must stop until a person looks; "" when they need not."""
        reasons = []
        if self.exposure_mismatches:
            reasons.append("exposure mismatch " + "; ".join(m.describe() for m in self.exposure_mismatches))
        if self.invariant_problems:
            reasons.append("capital invariant " + "; ".join(self.invariant_problems))
        return ", ".join(reasons)


@dataclass(frozen=True)
class _PendingRow:
    client_order_id: str
    instrument_id: int
    symbol: str


def _pending_rows(account_id: int) -> list[_PendingRow]:
    return [
        _PendingRow(row["client_order_id"], row["instrument_id"], row["instrument__venue_symbol"])
        for row in OrderIntent.objects.filter(account_id=account_id, state=OrderIntent.State.PENDING).values(
            "client_order_id", "instrument_id", "instrument__venue_symbol"
        )
    ]


def _load_local(account_id: int, prefix: str, claimed: list[_PendingRow]) -> tuple[LocalState, dict[str, str]]:
    """Read the account's state; `claimed` are the pending intents whose entry lease this pass holds."""
    # Re-read under the lease: an entry may have finished just before we took it.
    still_pending = set(
        OrderIntent.objects.filter(
            client_order_id__in=[row.client_order_id for row in claimed], state=OrderIntent.State.PENDING
        ).values_list("client_order_id", flat=True)
    )
    pending = [row for row in claimed if row.client_order_id in still_pending]
    symbol_of = {row.client_order_id: row.symbol for row in pending}
    working = [
        (LocalOrder(o.client_order_id, o.exchange_order_id, o.status, o.filled_quantity), o.instrument.venue_symbol)
        for o in Order.objects.filter(account_id=account_id)
        .exclude(status__in=TERMINAL_STATUSES)
        .select_related("instrument")
    ]
    for order, symbol in working:
        symbol_of[order.client_order_id] = symbol
    known_trades = frozenset(
        Fill.objects.filter(
            account_id=account_id, order__client_order_id__in=[o.client_order_id for o, _ in working]
        ).values_list("exchange_trade_id", flat=True)
    )
    known_clients = frozenset(
        OrderIntent.objects.filter(account_id=account_id).values_list("client_order_id", flat=True)
    )
    state = LocalState(
        account_id=account_id,
        prefix=prefix,
        pending_intents=tuple(row.client_order_id for row in pending),
        working=tuple(o for o, _ in working),
        known_trade_ids=known_trades,
        known_client_ids=known_clients,
    )
    return state, symbol_of


def _oldest_open_ns(account_id: int) -> int:
    oldest = (
        Order.objects.filter(account_id=account_id).exclude(status__in=TERMINAL_STATUSES).order_by("created_at").first()
    )
    intent = (
        OrderIntent.objects.filter(account_id=account_id, state=OrderIntent.State.PENDING)
        .order_by("created_at")
        .first()
    )
    moments = [row.created_at for row in (oldest, intent) if row is not None]
    start = min(moments) if moments else timezone.now()
    return int((start - FILL_LOOKBACK).timestamp() * 1e9)


async def lease_take(
    *, account_id: int, scope: str, owner: str, ttl_s: float, wait_s: float = 0.0, sleep: Sleep = asyncio.sleep
) -> bool:
    """Take a lease, waiting with backoff up to `wait_s` while another owner holds it.

    A lease left by a killed process frees itself at its expiry, so waiting one TTL
    (plus a margin) is enough to take it over; a live holder renews or releases it.
    """
    deadline = time.monotonic() + wait_s
    delay_s = 0.05
    while not await database_sync_to_async(lock_acquire)(account_id=account_id, scope=scope, owner=owner, ttl_s=ttl_s):
        if time.monotonic() + delay_s > deadline:
            return False
        await sleep(delay_s)
        delay_s = min(delay_s * 2, 0.5)
    return True


T = TypeVar("T")


async def _read(result: ReconcileResult, step: str, call: Awaitable[T]) -> T | None:
    """One broker read; a failure degrades this step only and is recorded with its reason."""
    try:
        return await call
    except BrokerError as exc:
        _degrade(result, step, exc)
        return None


def _degrade(result: ReconcileResult, step: str, exc: BaseException) -> None:
    if step not in result.degraded_steps:
        RECONCILIATION_DEGRADED_STEPS.labels(step).inc()
    result.degraded_steps[step] = str(exc) or type(exc).__name__


async def reconcile_account(
    *,
    account_id: int,
    broker: Broker,
    prefix: str,
    lock_ttl_s: float = 30.0,
    tracker: ReconcileTracker | None = None,
    lease_wait_s: float = 0.0,
    prompt_after_s: float = 300.0,
    exposure_accounts: Sequence[int] | None = None,
    before_exposure: Callable[[], Awaitable[None]] | None = None,
    sleep: Sleep = asyncio.sleep,
) -> ReconcileResult:
    """Run one reconciliation pass for one account.

    `lease_wait_s` bounds how long the pass waits for the account's reconcile lease and
    for each pending intent's entry lease (0: skip at once, as the periodic pass does
    when another process is already reconciling; the restart rebuild waits one TTL).
    `exposure_accounts` are the accounts whose combined net position this broker's
    positions stand for (default: this account alone; several when they share one
    venue key; empty: compared in another account's pass). `before_exposure` is awaited
    before that comparison: the other accounts' passes on the key book their fills first.
    """
    result = ReconcileResult(account_id)
    owner = new_owner_token()
    if not await lease_take(
        account_id=account_id, scope=RECONCILE_SCOPE, owner=owner, ttl_s=lock_ttl_s, wait_s=lease_wait_s, sleep=sleep
    ):
        result.skipped = "another process is reconciling this account"
        if lease_wait_s:
            result.skipped += f" (its lease was not released or expired within {lease_wait_s:.0f}s)"
        return result
    held: list[tuple[int, str]] = []  # (account, scope) leases this pass took
    try:
        account_prefix = client_id_prefix(prefix, account_id)
        claimed: list[_PendingRow] = []
        for row in await database_sync_to_async(_pending_rows)(account_id):
            scope = entry_scope(row.instrument_id)
            if (account_id, scope) not in held:
                if not await lease_take(
                    account_id=account_id, scope=scope, owner=owner, ttl_s=lock_ttl_s, wait_s=lease_wait_s, sleep=sleep
                ):
                    continue  # the executor is placing it right now; the next pass asks
                held.append((account_id, scope))
            claimed.append(row)
        local, symbol_of = await database_sync_to_async(_load_local)(account_id, account_prefix, claimed)
        symbols = sorted(set(symbol_of.values()))
        listed = await _read(result, "open_orders", broker.open_orders(symbols=symbols))
        open_orders = listed or []
        open_by_id = {order.client_order_id: order for order in open_orders}
        looked_up: dict[str, BrokerOrder | None] = {}
        for client_id in local.pending_intents:
            if client_id in open_by_id:
                looked_up[client_id] = open_by_id[client_id]  # listed: no need to ask for it
        unsure = [
            *(cid for cid in local.pending_intents if cid not in looked_up),
            *(o.client_order_id for o in local.working if o.client_order_id not in open_by_id),
        ]
        for client_id in unsure:
            try:
                looked_up[client_id] = await broker.fetch_order(client_order_id=client_id, symbol=symbol_of[client_id])
            except OrderNotFound:
                looked_up[client_id] = None
            except BrokerError as exc:
                _degrade(result, "lookup", exc)  # unknown stays unknown: asked again next pass
        since_ns = await database_sync_to_async(_oldest_open_ns)(account_id)
        fill_symbols = sorted(set(symbols) | {o.symbol for o in open_orders})
        fills = (
            (await _read(result, "fills", broker.fills(symbols=fill_symbols, since_ns=since_ns)) or [])
            if fill_symbols
            else []
        )
        venue = VenueReport(tuple(open_orders), looked_up, tuple(fills))
        for correction in diff(local, venue):
            await _apply(correction, account_id, broker)
            _count(result, correction)
        result.unresolved = tuple(cid for cid in local.pending_intents if cid not in looked_up)
        if result.unresolved:
            await database_sync_to_async(intents_unresolved_record)(
                client_order_ids=list(result.unresolved), prompt_after_s=prompt_after_s
            )
        group = (account_id,) if exposure_accounts is None else tuple(exposure_accounts)
        if group:
            if before_exposure is not None:
                await before_exposure()
            await _check_exposure(result, group, broker, owner, lock_ttl_s, held, {o.symbol for o in open_orders})
        result.awaiting_decision = tuple(await database_sync_to_async(intents_awaiting_decision)(account_id=account_id))
        report = await database_sync_to_async(ledger_check)(account_id=account_id)
        result.invariant_problems = report.problems
        if report.problems:
            log.error("orders reconcile account %s: capital invariant: %s", account_id, "; ".join(report.problems))
    finally:
        for lease_account, scope in held:
            await database_sync_to_async(lock_release)(account_id=lease_account, scope=scope, owner=owner)
        await database_sync_to_async(lock_release)(account_id=account_id, scope=RECONCILE_SCOPE, owner=owner)
    if tracker is not None:
        tracker.record(result)
    return result


def _count(result: ReconcileResult, correction: object) -> None:
    kind = type(correction).__name__
    result.corrections[kind] = result.corrections.get(kind, 0) + 1
    if not isinstance(correction, MissingAtBroker):
        RECONCILIATION_MISMATCHES.labels(kind).inc()


async def _check_exposure(
    result: ReconcileResult,
    account_ids: tuple[int, ...],
    broker: Broker,
    owner: str,
    lock_ttl_s: float,
    held: list[tuple[int, str]],
    listed_symbols: set[str],
) -> None:
    """Compare the site's net position per symbol with the broker's; apply missed fills, raise the rest.

    Only quiet symbols are compared (nothing working at the site or the broker), each
    under the entry leases of its instruments so no order starts while the two sides
    are read.
    """
    books = await database_sync_to_async(site_exposure)(account_ids)
    leased: set[str] = set()
    for symbol, book in books.items():
        if book.busy or symbol in listed_symbols:
            continue
        taken = True
        for lease_account, instrument_id in book.entries:
            lease = (lease_account, entry_scope(instrument_id))
            if lease in held:
                continue
            if await database_sync_to_async(lock_acquire)(
                account_id=lease_account, scope=lease[1], owner=owner, ttl_s=lock_ttl_s
            ):
                held.append(lease)
            else:
                taken = False  # an entry or exit is starting: compared next pass
        if taken:
            leased.add(symbol)
    positions = await _read(result, "positions", broker.positions())
    if positions is None:
        return
    books = await database_sync_to_async(site_exposure)(account_ids)  # again, under the leases
    compared = {symbol for symbol in leased if not books[symbol].busy}
    mismatches = exposure_diff(books, positions, compared=compared)
    if mismatches:
        since_ns = int((timezone.now() - EXPOSURE_FILL_LOOKBACK).timestamp() * 1e9)
        recent = await _read(result, "fills", broker.fills(symbols=[m.symbol for m in mismatches], since_ns=since_ns))
        missed = await database_sync_to_async(_unbooked_fills)(account_ids, recent or [])
        for order_account, fill in missed:
            applied = await database_sync_to_async(lifecycle.lifecycle_apply_fill)(
                account_id=order_account, fill=fill, via_reconciliation=True
            )
            if applied:
                _count(result, ApplyFill(fill))
        if missed:
            books = await database_sync_to_async(site_exposure)(account_ids)
            mismatches = exposure_diff(books, positions, compared=compared)
    for mismatch in mismatches:
        await database_sync_to_async(audit_record)(
            event="reconcile.exposure_mismatch",
            account_id=result.account_id,
            message=f"{mismatch.describe()}; no fill of ours explains it: an operator must look",
            details={
                "symbol": mismatch.symbol,
                "site": fixed_to_str(mismatch.site),
                "broker": fixed_to_str(mismatch.broker),
                **({"accounts": list(account_ids)} if len(account_ids) > 1 else {}),
            },
        )
        RECONCILIATION_EXPOSURE_MISMATCHES.inc()
        _count(result, mismatch)
    result.exposure_mismatches = tuple(mismatches)
    result.exposure_accounts = account_ids


def _unbooked_fills(account_ids: tuple[int, ...], fills: list[BrokerFill]) -> list[tuple[int, BrokerFill]]:
    """The broker's fills of orders the site has whose trade the site has not booked, with the order's account."""
    account_of = dict(
        Order.objects.filter(
            account_id__in=account_ids, exchange_order_id__in={f.exchange_order_id for f in fills}
        ).values_list("exchange_order_id", "account_id")
    )
    booked = set(
        Fill.objects.filter(
            account_id__in=account_ids, exchange_trade_id__in=[f.exchange_trade_id for f in fills]
        ).values_list("account_id", "exchange_trade_id")
    )
    return [
        (account_of[f.exchange_order_id], f)
        for f in fills
        if f.exchange_order_id in account_of and (account_of[f.exchange_order_id], f.exchange_trade_id) not in booked
    ]


async def _apply(correction: Correction, account_id: int, broker: Broker) -> None:
    if isinstance(correction, Adopt):
        await database_sync_to_async(lifecycle.lifecycle_persist)(
            broker_order=correction.order, via_reconciliation=True
        )
        await database_sync_to_async(signal_outcome_settle)(
            client_order_id=correction.order.client_order_id,
            outcome=Outcome.PLACED,
            reason="adopted: the broker has it",
        )
    elif isinstance(correction, Abandon):
        await database_sync_to_async(lifecycle.intent_abandon)(
            client_order_id=correction.client_order_id, reason="the broker has no such order", via_reconciliation=True
        )
        await database_sync_to_async(signal_outcome_settle)(
            client_order_id=correction.client_order_id, outcome=Outcome.ABANDONED, reason="the broker never had it"
        )
    elif isinstance(correction, ApplyFill):
        await database_sync_to_async(lifecycle.lifecycle_apply_fill)(
            account_id=account_id, fill=correction.fill, via_reconciliation=True
        )
    elif isinstance(correction, UpdateStatus):
        await database_sync_to_async(lifecycle.lifecycle_order_update)(
            account_id=account_id, broker_order=correction.order, via_reconciliation=True
        )
    elif isinstance(correction, CancelForeign):
        try:
            await broker.cancel_order(
                client_order_id=correction.order.client_order_id,
                exchange_order_id=correction.order.exchange_order_id,
                symbol=correction.order.symbol,
            )
        except BrokerError as exc:
            log.warning("orders reconcile: cancel of foreign %s failed: %s", correction.order.client_order_id, exc)
        await database_sync_to_async(audit_record)(
            event="reconcile.foreign",
            account_id=account_id,
            client_order_id=correction.order.client_order_id,
            message="order with our prefix and no intent: canceled at the broker",
        )
    elif isinstance(correction, MissingAtBroker):
        await database_sync_to_async(audit_record)(
            event="reconcile.missing_at_broker",
            account_id=account_id,
            client_order_id=correction.client_order_id,
            message="working order unknown to the broker; left as is for an operator",
        )


class ReconcileTracker:
    """Counters of the last passes for health: mismatches, missing counts, invariant problems."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.last_run: float | None = None
        self.mismatches = 0
        self.missing_at_broker = 0
        self.missing_in_db = 0
        self.invariant_violations = 0
        self.clean_passes = 0
        self.exposure_mismatches = 0
        self.awaiting_decision = 0

    def record(self, result: ReconcileResult) -> None:
        self.last_run = self._clock()
        corrections = sum(n for kind, n in result.corrections.items() if kind != "MissingAtBroker")
        self.mismatches += corrections
        self.missing_at_broker = result.corrections.get("MissingAtBroker", 0)
        self.missing_in_db = result.corrections.get("Adopt", 0) + result.corrections.get("CancelForeign", 0)
        self.invariant_violations += 1 if result.invariant_problems else 0
        self.clean_passes = self.clean_passes + 1 if not corrections and not result.invariant_problems else 0
        self.exposure_mismatches = len(result.exposure_mismatches)
        self.awaiting_decision = len(result.awaiting_decision)
        RECONCILIATION_AWAITING_DECISION.set(self.awaiting_decision)
        RECONCILIATION_LAST_RUN.set(self.last_run)
        RECONCILIATION_MISSING_AT_BROKER.set(self.missing_at_broker)
        RECONCILIATION_MISSING_IN_DB.set(self.missing_in_db)


def accounts_to_reconcile(brokers: Sequence[str] | None = None) -> list[tuple[int, str, str]]:
    """Return (account id, broker, trade mode) of every account with a ledger, one mode per account."""
    rows = Account.objects.filter(ledger__isnull=False).order_by("pk")
    if brokers is not None:
        rows = rows.filter(broker__in=brokers)
    result = []
    for account in rows.prefetch_related("trade_settings"):
        modes = {setting.mode for setting in account.trade_settings.all()} or {
            "paper" if account.broker == "paper" else "live"
        }
        for mode in sorted(modes):
            result.append((account.pk, account.broker, mode))
    return result
